// The step and check helpers the Java check programs share (compiled with each of them by
// tests/support/java.rs `run_check`): the first failed check ends the program with
// "FAIL: <step>: <detail>" on stderr and exit status 1.
public final class Check {
    private static String step = "start";

    private Check() {}

    static void step(String name) {
        step = name;
    }

    static void fail(String msg) {
        System.err.println("FAIL: " + step + ": " + msg);
        System.exit(1);
    }

    static void check(boolean cond, String msg) {
        if (!cond) fail(msg);
    }
}
