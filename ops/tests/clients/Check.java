// The step and check helpers the Java check programs share (compiled with each of them by
// tests/support/java.rs `run_check`): the first failed check ends the program with
// "FAIL: <step>: <detail>" on stderr and exit status 1.
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;

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

    /// An Admin client of `bootstrap` (30 s per call).
    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        return Admin.create(p);
    }
}
