//! ringlog's network room: the Kafka protocol server. Per core: a listener (SO_REUSEPORT), the
//! connections it accepted, request decoding with the `kafka-protocol` crate, and handlers that
//! split each request by owner core and gather the answers through the engine's cross-core
//! primitive. See ARCHITECTURE.md.

pub mod acl;
pub mod admin_http;
pub mod api;
pub mod barrier;
pub mod broker;
pub mod broker_configs;
pub mod broker_loggers;
pub mod brokers;
pub mod cluster;
pub mod codes;
pub mod config;
pub mod conn;
pub mod conn_table;
pub mod coordinator;
pub mod coordinator_load;
pub(crate) mod coordinators;
pub mod core;
pub mod cursor_registry;
pub mod fanout_runtime;
pub mod fd_budget;
pub mod fetch_session;
pub mod group;
pub mod lazy_reserve;
pub mod leader_balance;
pub mod log_cleaner;
pub mod metrics;
pub mod node_rpc;
pub mod oauth;
pub mod opening;
pub mod partition_move;
pub(crate) mod periodic;
pub mod quota;
pub mod reconcile;
pub mod replica;
pub mod replica_fetcher;
pub mod replica_state;
pub mod route;
pub mod sasl;
pub mod shard_view;
pub mod tls;
pub mod topic_config;
pub mod txn;
pub mod unknown_topic_log;
pub mod unopened;

pub use config::BrokerConfig;
