//! COMMAND DOCS: a summary, group, first version and argument structure for every command
//! Osprey serves, as redis-server 7 gives them, which is what redis-cli builds its inline
//! argument hints from.
//!
//! The table holds each command's syntax as Redis documents it; the argument structure is
//! parsed from it on demand. Syntax notation: an UPPER-CASE word is a literal token, `[...]`
//! is optional, `<a | b>` and `[a | b]` are alternatives, and `x [x ...]` repeats `x`. An
//! argument is a string unless named `key`, `newkey`, `source` or `destination` (a key),
//! `pattern` (a pattern) or `unix-time-*` (a Unix time), or typed by a `:type` suffix, which
//! is not part of its name (`seconds:integer`).

use std::collections::HashMap;
use std::sync::LazyLock;

use wire_resp::Args;

use super::commands;
use super::reply::Reply;

/// A command's documentation: name (`container|subcommand` for a subcommand), the Redis
/// version that introduced it, a one-line summary, and its syntax after the name.
type Doc = (&'static str, &'static str, &'static str, &'static str);

/// Every documented command and subcommand, by Redis command group.
#[rustfmt::skip]
const GROUPS: &[(&str, &[Doc])] = &[
    ("connection", &[
        ("auth", "1.0.0", "Authenticates the connection.", "[username] password"),
        ("client", "2.4.0", "A container for client connection commands", ""),
        ("client|getname", "2.6.9", "Get the current connection name", ""),
        ("client|help", "5.0.0", "Returns helpful text about the different subcommands.", ""),
        ("client|id", "5.0.0", "Returns the client ID for the current connection", ""),
        ("client|info", "6.2.0", "Returns information about the current client connection.", ""),
        ("client|kill", "2.4.0", "Terminates open connections.",
            "<old-format | [ID client-id:integer] [TYPE <NORMAL | MASTER | SLAVE | REPLICA | PUBSUB>] [USER username] [ADDR addr] [LADDR laddr] [SKIPME <YES | NO>] [MAXAGE maxage:integer]>"),
        ("client|list", "2.4.0", "Get the list of client connections",
            "[TYPE <NORMAL | MASTER | REPLICA | PUBSUB>] [ID client-id:integer [client-id:integer ...]]"),
        ("client|no-evict", "7.0.0", "Sets the client eviction mode of the connection.", "<ON | OFF>"),
        ("client|no-touch", "7.2.0", "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.",
            "<ON | OFF>"),
        ("client|pause", "3.0.0", "Suspends commands processing.", "timeout:integer [WRITE | ALL]"),
        ("client|reply", "3.2.0", "Instructs the server whether to reply to commands.", "<ON | OFF | SKIP>"),
        ("client|setinfo", "7.2.0", "Sets information specific to the client or connection.",
            "<LIB-NAME libname | LIB-VER libver>"),
        ("client|setname", "2.6.9", "Set the current connection name", "connection-name"),
        ("client|unblock", "5.0.0", "Unblock a client blocked in a blocking command from a different connection",
            "client-id:integer [TIMEOUT | ERROR]"),
        ("client|unpause", "6.2.0", "Resumes processing commands from paused clients.", ""),
        ("echo", "1.0.0", "Echo the given string", "message"),
        ("hello", "6.0.0", "Handshake with Redis",
            "[protover:integer [AUTH username password] [SETNAME clientname]]"),
        ("ping", "1.0.0", "Ping the server", "[message]"),
        ("quit", "1.0.0", "Close the connection", ""),
        ("reset", "6.2.0", "Reset the connection", ""),
        ("select", "1.0.0", "Change the selected database for the current connection",
            "index:integer"),
    ]),
    ("server", &[
        ("acl", "6.0.0", "A container for Access List Control commands.", ""),
        ("acl|cat", "6.0.0", "Lists the ACL categories, or the commands inside a category.", "[category]"),
        ("acl|deluser", "6.0.0", "Deletes ACL users, and terminates their connections.",
            "username [username ...]"),
        ("acl|dryrun", "7.0.0", "Simulates the execution of a command by a user, without executing the command.",
            "username command [arg [arg ...]]"),
        ("acl|getuser", "6.0.0", "Lists the ACL rules of a user.", "username"),
        ("acl|help", "6.0.0", "Returns helpful text about the different subcommands.", ""),
        ("acl|list", "6.0.0", "Dumps the effective rules in ACL file format.", ""),
        ("acl|load", "6.0.0", "Reloads the rules from the configured ACL file.", ""),
        ("acl|log", "6.0.0", "Lists recent security events generated due to ACL rules.",
            "[count:integer | RESET]"),
        ("acl|save", "6.0.0", "Saves the effective ACL rules in the configured ACL file.", ""),
        ("acl|setuser", "6.0.0", "Creates and modifies an ACL user and its rules.", "username [rule [rule ...]]"),
        ("acl|users", "6.0.0", "Lists all ACL users.", ""),
        ("acl|whoami", "6.0.0", "Returns the authenticated username of the current connection.", ""),
        ("command", "2.8.13", "Get array of Redis command details", ""),
        ("command|count", "2.8.13", "Get total number of Redis commands", ""),
        ("command|docs", "7.0.0", "Get array of specific Redis command documentation",
            "[command-name [command-name ...]]"),
        ("command|getkeys", "2.8.13", "Extract keys given a full Redis command",
            "command arg [arg ...]"),
        ("command|getkeysandflags", "7.0.0", "Extract keys and access flags given a full Redis command",
            "command arg [arg ...]"),
        ("command|info", "2.8.13", "Get array of specific Redis command details, or all when no argument is given.",
            "[command-name [command-name ...]]"),
        ("config", "2.0.0", "A container for server configuration commands", ""),
        ("config|get", "2.0.0", "Get the values of configuration parameters",
            "parameter [parameter ...]"),
        ("config|help", "5.0.0", "Returns helpful text about the different subcommands.", ""),
        ("config|resetstat", "2.0.0", "Reset the stats returned by INFO", ""),
        ("config|rewrite", "2.8.0", "Persists the effective configuration to file.", ""),
        ("config|set", "2.0.0", "Set configuration parameters to the given values",
            "parameter value [parameter value ...]"),
        ("dbsize", "1.0.0", "Return the number of keys in the selected database", ""),
        ("debug", "1.0.0", "A container for debugging commands.", ""),
        ("flushall", "1.0.0", "Remove all keys from all databases", "[ASYNC | SYNC]"),
        ("flushdb", "1.0.0", "Remove all keys from the current database", "[ASYNC | SYNC]"),
        ("latency", "2.8.13", "A container for latency diagnostics commands.", ""),
        ("latency|doctor", "2.8.13", "Returns a human-readable latency analysis report.", ""),
        ("latency|graph", "2.8.13", "Returns a latency graph for an event.", "event"),
        ("latency|help", "2.8.13", "Returns helpful text about the different subcommands.", ""),
        ("latency|histogram", "7.0.0", "Returns the cumulative distribution of latencies of a subset or all commands.",
            "[command [command ...]]"),
        ("latency|history", "2.8.13", "Returns timestamp-latency samples for an event.", "event"),
        ("latency|latest", "2.8.13", "Returns the latest latency samples for all events.", ""),
        ("latency|reset", "2.8.13", "Resets the latency data for one or more events.", "[event [event ...]]"),
        ("memory", "4.0.0", "A container for memory diagnostics commands", ""),
        ("memory|usage", "4.0.0", "Estimate the memory usage of a key", "key [SAMPLES count:integer]"),
        ("monitor", "1.0.0", "Listen for all requests received by the server in real time", ""),
        ("save", "1.0.0", "Synchronously save the dataset to disk", ""),
        ("bgsave", "1.0.0", "Asynchronously save the dataset to disk", "[SCHEDULE]"),
        ("lastsave", "1.0.0", "Get the Unix timestamp of the last successful save to disk", ""),
        ("shutdown", "1.0.0", "Synchronously save the dataset to disk and then shut down the server",
            "[NOSAVE | SAVE] [NOW] [FORCE] [ABORT]"),
        ("info", "1.0.0", "Get information and statistics about the server",
            "[section [section ...]]"),
        ("slowlog", "2.2.12", "A container for slow log commands.", ""),
        ("slowlog|get", "2.2.12", "Returns the slow log's entries.", "[count:integer]"),
        ("slowlog|help", "6.2.0", "Show helpful text about the different subcommands", ""),
        ("slowlog|len", "2.2.12", "Returns the number of entries in the slow log.", ""),
        ("slowlog|reset", "2.2.12", "Clears all entries from the slow log.", ""),
        ("swapdb", "4.0.0", "Swaps two Redis databases", "index1:integer index2:integer"),
        ("time", "2.6.0", "Return the current server time", ""),
    ]),
    ("transactions", &[
        ("discard", "2.0.0", "Discard all commands issued after MULTI", ""),
        ("exec", "1.2.0", "Execute all commands issued after MULTI", ""),
        ("multi", "1.2.0", "Mark the start of a transaction block", ""),
        ("unwatch", "2.2.0", "Forget about all watched keys", ""),
        ("watch", "2.2.0", "Watch the given keys to determine execution of the MULTI/EXEC block",
            "key [key ...]"),
    ]),
    ("scripting", &[
        ("eval", "2.6.0", "Executes a server-side Lua script.",
            "script numkeys:integer [key [key ...]] [arg [arg ...]]"),
        ("eval_ro", "7.0.0", "Executes a read-only server-side Lua script.",
            "script numkeys:integer [key [key ...]] [arg [arg ...]]"),
        ("evalsha", "2.6.0", "Executes a server-side Lua script by SHA1 digest.",
            "sha1 numkeys:integer [key [key ...]] [arg [arg ...]]"),
        ("evalsha_ro", "7.0.0", "Executes a read-only server-side Lua script by SHA1 digest.",
            "sha1 numkeys:integer [key [key ...]] [arg [arg ...]]"),
        ("script", "2.6.0", "A container for Lua scripts management commands.", ""),
        ("script|exists", "2.6.0", "Determines whether server-side Lua scripts exist in the script cache.",
            "sha1 [sha1 ...]"),
        ("script|flush", "2.6.0", "Removes all server-side Lua scripts from the script cache.",
            "[ASYNC | SYNC]"),
        ("script|help", "5.0.0", "Returns helpful text about the different subcommands.", ""),
        ("script|kill", "2.6.0", "Terminates a server-side Lua script during execution.", ""),
        ("script|load", "2.6.0", "Loads a server-side Lua script to the script cache.", "script"),
        ("fcall", "7.0.0", "Invokes a function.",
            "function numkeys:integer [key [key ...]] [arg [arg ...]]"),
        ("fcall_ro", "7.0.0", "Invokes a read-only function.",
            "function numkeys:integer [key [key ...]] [arg [arg ...]]"),
        ("function", "7.0.0", "A container for function commands.", ""),
        ("function|delete", "7.0.0", "Deletes a library and its functions.", "library-name"),
        ("function|dump", "7.0.0", "Dumps all libraries into a serialized binary payload.", ""),
        ("function|flush", "7.0.0", "Deletes all libraries and functions.", "[ASYNC | SYNC]"),
        ("function|help", "7.0.0", "Returns helpful text about the different subcommands.", ""),
        ("function|kill", "7.0.0", "Terminates a function during execution.", ""),
        ("function|list", "7.0.0", "Returns information about all libraries.",
            "[LIBRARYNAME library-name-pattern] [WITHCODE]"),
        ("function|load", "7.0.0", "Creates a library.", "[REPLACE] function-code"),
        ("function|restore", "7.0.0", "Restores all libraries from a payload.",
            "serialized-value [FLUSH | APPEND | REPLACE]"),
        ("function|stats", "7.0.0", "Returns information about a function during execution.", ""),
    ]),
    ("generic", &[
        ("copy", "6.2.0", "Copy a key", "source destination [DB destination-db:integer] [REPLACE]"),
        ("del", "1.0.0", "Delete a key", "key [key ...]"),
        ("dump", "2.6.0", "Return a serialized version of the value stored at the specified key.",
            "key"),
        ("exists", "1.0.0", "Determine if a key exists", "key [key ...]"),
        ("move", "1.0.0", "Move a key to another database", "key db:integer"),
        ("expire", "1.0.0", "Set a key's time to live in seconds",
            "key seconds:integer [NX | XX | GT | LT]"),
        ("expireat", "1.2.0", "Set the expiration for a key as a UNIX timestamp",
            "key unix-time-seconds [NX | XX | GT | LT]"),
        ("expiretime", "7.0.0", "Get the expiration Unix timestamp for a key", "key"),
        ("keys", "1.0.0", "Find all keys matching the given pattern", "pattern"),
        ("persist", "2.2.0", "Remove the expiration from a key", "key"),
        ("pexpire", "2.6.0", "Set a key's time to live in milliseconds",
            "key milliseconds:integer [NX | XX | GT | LT]"),
        ("pexpireat", "2.6.0", "Set the expiration for a key as a UNIX timestamp specified in milliseconds",
            "key unix-time-milliseconds [NX | XX | GT | LT]"),
        ("pexpiretime", "7.0.0", "Get the expiration Unix timestamp for a key in milliseconds",
            "key"),
        ("pttl", "2.6.0", "Get the time to live for a key in milliseconds", "key"),
        ("randomkey", "1.0.0", "Return a random key from the keyspace", ""),
        ("object", "2.2.3", "A container for object introspection commands", ""),
        ("object|encoding", "2.2.3", "Inspect the internal encoding of a Redis object", "key"),
        ("object|freq", "4.0.0", "Get the logarithmic access frequency counter of a Redis object",
            "key"),
        ("object|help", "6.2.0", "Show helpful text about the different subcommands", ""),
        ("object|idletime", "2.2.3", "Get the time since a Redis object was last accessed",
            "key"),
        ("object|refcount", "2.2.3", "Get the number of references to the value of the key",
            "key"),
        ("rename", "1.0.0", "Rename a key", "key newkey"),
        ("restore", "2.6.0", "Create a key using the provided serialized value, previously obtained using DUMP.",
            "key ttl:integer serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds:integer] [FREQ frequency:integer]"),
        ("renamenx", "1.0.0", "Rename a key, only if the new key does not exist", "key newkey"),
        ("scan", "2.8.0", "Incrementally iterate the keys space",
            "cursor:integer [MATCH pattern] [COUNT count:integer] [TYPE type]"),
        ("sort", "1.0.0", "Sort the elements in a list, set or sorted set",
            "key [BY pattern] [LIMIT offset:integer count:integer] [GET pattern] [ASC | DESC] [ALPHA] [STORE destination]"),
        ("sort_ro", "7.0.0", "Sort the elements in a list, set or sorted set. Read-only variant of SORT.",
            "key [BY pattern] [LIMIT offset:integer count:integer] [GET pattern] [ASC | DESC] [ALPHA]"),
        ("touch", "3.2.1", "Alters the last access time of a key(s). Returns the number of existing keys specified.",
            "key [key ...]"),
        ("ttl", "1.0.0", "Get the time to live for a key in seconds", "key"),
        ("type", "1.0.0", "Determine the type stored at key", "key"),
        ("unlink", "4.0.0", "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking.",
            "key [key ...]"),
        ("wait", "3.0.0", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.",
            "numreplicas:integer timeout:integer"),
        ("waitaof", "7.2.0", "Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the master and/or replicas.",
            "numlocal:integer numreplicas:integer timeout:integer"),
    ]),
    ("string", &[
        ("append", "2.0.0", "Append a value to a key", "key value"),
        ("decr", "1.0.0", "Decrement the integer value of a key by one", "key"),
        ("decrby", "1.0.0", "Decrement the integer value of a key by the given number",
            "key decrement:integer"),
        ("get", "1.0.0", "Get the value of a key", "key"),
        ("getdel", "6.2.0", "Get the value of a key and delete the key", "key"),
        ("getex", "6.2.0", "Get the value of a key and optionally set its expiration",
            "key [EX seconds:integer | PX milliseconds:integer | EXAT unix-time-seconds | PXAT unix-time-milliseconds | PERSIST]"),
        ("getrange", "2.4.0", "Get a substring of the string stored at a key",
            "key start:integer end:integer"),
        ("getset", "1.0.0", "Set the string value of a key and return its old value", "key value"),
        ("incr", "1.0.0", "Increment the integer value of a key by one", "key"),
        ("incrby", "1.0.0", "Increment the integer value of a key by the given amount",
            "key increment:integer"),
        ("incrbyfloat", "2.6.0", "Increment the float value of a key by the given amount",
            "key increment:double"),
        ("lcs", "7.0.0", "Find longest common substring",
            "key1:key key2:key [LEN] [IDX] [MINMATCHLEN min-match-len:integer] [WITHMATCHLEN]"),
        ("mget", "1.0.0", "Get the values of all the given keys", "key [key ...]"),
        ("mset", "1.0.1", "Set multiple keys to multiple values", "key value [key value ...]"),
        ("msetnx", "1.0.1", "Set multiple keys to multiple values, only if none of the keys exist",
            "key value [key value ...]"),
        ("psetex", "2.6.0", "Set the value and expiration in milliseconds of a key",
            "key milliseconds:integer value"),
        ("set", "1.0.0", "Set the string value of a key",
            "key value [NX | XX] [GET] [EX seconds:integer | PX milliseconds:integer | EXAT unix-time-seconds | PXAT unix-time-milliseconds | KEEPTTL]"),
        ("setex", "2.0.0", "Set the value and expiration of a key", "key seconds:integer value"),
        ("setnx", "1.0.0", "Set the value of a key, only if the key does not exist", "key value"),
        ("setrange", "2.2.0", "Overwrite part of a string at key starting at the specified offset",
            "key offset:integer value"),
        ("strlen", "2.2.0", "Get the length of the value stored in a key", "key"),
        ("substr", "1.0.0", "Get a substring of the string stored at a key",
            "key start:integer end:integer"),
    ]),
    ("bitmap", &[
        ("bitcount", "2.6.0", "Count set bits in a string",
            "key [start:integer end:integer [BYTE | BIT]]"),
        ("bitfield", "3.2.0", "Perform arbitrary bitfield integer operations on strings",
            "key [<GET encoding offset | [OVERFLOW <WRAP | SAT | FAIL>] <SET encoding offset value:integer | INCRBY encoding offset increment:integer>> [<GET encoding offset | [OVERFLOW <WRAP | SAT | FAIL>] <SET encoding offset value:integer | INCRBY encoding offset increment:integer>> ...]]"),
        ("bitfield_ro", "6.0.0", "Perform arbitrary bitfield integer operations on strings. Read-only variant of BITFIELD",
            "key [<GET encoding offset> [<GET encoding offset> ...]]"),
        ("bitop", "2.6.0", "Perform bitwise operations between strings",
            "<AND | OR | XOR | NOT> destkey:key key [key ...]"),
        ("bitpos", "2.8.7", "Find first bit set or clear in a string",
            "key bit:integer [start:integer [end:integer [BYTE | BIT]]]"),
        ("getbit", "2.2.0", "Returns the bit value at offset in the string value stored at key",
            "key offset:integer"),
        ("setbit", "2.2.0", "Sets or clears the bit at offset in the string value stored at key",
            "key offset:integer value:integer"),
    ]),
    ("hyperloglog", &[
        ("pfadd", "2.8.9", "Adds the specified elements to the specified HyperLogLog.",
            "key [element [element ...]]"),
        ("pfdebug", "2.8.9", "Internal commands for debugging HyperLogLog values",
            "subcommand key"),
        ("pfcount", "2.8.9", "Return the approximated cardinality of the set(s) observed by the HyperLogLog at key(s).",
            "key [key ...]"),
        ("pfmerge", "2.8.9", "Merge N different HyperLogLogs into a single one.",
            "destkey:key [sourcekey:key [sourcekey:key ...]]"),
        ("pfselftest", "2.8.9", "An internal command for testing HyperLogLog values", ""),
    ]),
    ("hash", &[
        ("hdel", "2.0.0", "Delete one or more hash fields", "key field [field ...]"),
        ("hexists", "2.0.0", "Determine if a hash field exists", "key field"),
        ("hget", "2.0.0", "Get the value of a hash field", "key field"),
        ("hgetall", "2.0.0", "Get all the fields and values in a hash", "key"),
        ("hincrby", "2.0.0", "Increment the integer value of a hash field by the given number",
            "key field increment:integer"),
        ("hincrbyfloat", "2.6.0", "Increment the float value of a hash field by the given amount",
            "key field increment:double"),
        ("hkeys", "2.0.0", "Get all the fields in a hash", "key"),
        ("hlen", "2.0.0", "Get the number of fields in a hash", "key"),
        ("hmget", "2.0.0", "Get the values of all the given hash fields", "key field [field ...]"),
        ("hmset", "2.0.0", "Set multiple hash fields to multiple values",
            "key field value [field value ...]"),
        ("hscan", "2.8.0", "Incrementally iterate hash fields and associated values",
            "key cursor:integer [MATCH pattern] [COUNT count:integer]"),
        ("hset", "2.0.0", "Set the string value of a hash field",
            "key field value [field value ...]"),
        ("hsetnx", "2.0.0", "Set the value of a hash field, only if the field does not exist",
            "key field value"),
        ("hstrlen", "3.2.0", "Get the length of the value of a hash field", "key field"),
        ("hvals", "2.0.0", "Get all the values in a hash", "key"),
    ]),
    ("list", &[
        ("blmove", "6.2.0", "Pop an element from a list, push it to another list and return it; or block until one is available",
            "source destination <LEFT | RIGHT> <LEFT | RIGHT> timeout:double"),
        ("blmpop", "7.0.0", "Pop elements from a list, or block until one is available",
            "timeout:double numkeys:integer key [key ...] <LEFT | RIGHT> [COUNT count:integer]"),
        ("blpop", "2.0.0", "Remove and get the first element in a list, or block until one is available",
            "key [key ...] timeout:double"),
        ("brpop", "2.0.0", "Remove and get the last element in a list, or block until one is available",
            "key [key ...] timeout:double"),
        ("brpoplpush", "2.2.0", "Pop an element from a list, push it to another list and return it; or block until one is available",
            "source destination timeout:double"),
        ("lindex", "1.0.0", "Get an element from a list by its index", "key index:integer"),
        ("linsert", "2.2.0", "Insert an element before or after another element in a list",
            "key <BEFORE | AFTER> pivot element"),
        ("llen", "1.0.0", "Get the length of a list", "key"),
        ("lmove", "6.2.0", "Pop an element from a list, push it to another list and return it",
            "source destination <LEFT | RIGHT> <LEFT | RIGHT>"),
        ("lmpop", "7.0.0", "Pop elements from a list",
            "numkeys:integer key [key ...] <LEFT | RIGHT> [COUNT count:integer]"),
        ("lpop", "1.0.0", "Remove and get the first elements in a list", "key [count:integer]"),
        ("lpos", "6.0.6", "Return the index of matching elements on a list",
            "key element [RANK rank:integer] [COUNT num-matches:integer] [MAXLEN len:integer]"),
        ("lpush", "1.0.0", "Prepend one or multiple elements to a list",
            "key element [element ...]"),
        ("lpushx", "2.2.0", "Prepend an element to a list, only if the list exists",
            "key element [element ...]"),
        ("lrange", "1.0.0", "Get a range of elements from a list",
            "key start:integer stop:integer"),
        ("lrem", "1.0.0", "Remove elements from a list", "key count:integer element"),
        ("lset", "1.0.0", "Set the value of an element in a list by its index",
            "key index:integer element"),
        ("ltrim", "1.0.0", "Trim a list to the specified range", "key start:integer stop:integer"),
        ("rpop", "1.0.0", "Remove and get the last elements in a list", "key [count:integer]"),
        ("rpoplpush", "1.2.0", "Remove the last element in a list, prepend it to another list and return it",
            "source destination"),
        ("rpush", "1.0.0", "Append one or multiple elements to a list",
            "key element [element ...]"),
        ("rpushx", "2.2.0", "Append an element to a list, only if the list exists",
            "key element [element ...]"),
    ]),
    ("set", &[
        ("sadd", "1.0.0", "Add one or more members to a set", "key member [member ...]"),
        ("scard", "1.0.0", "Get the number of members in a set", "key"),
        ("sdiff", "1.0.0", "Subtract multiple sets", "key [key ...]"),
        ("sdiffstore", "1.0.0", "Subtract multiple sets and store the resulting set in a key",
            "destination key [key ...]"),
        ("sinter", "1.0.0", "Intersect multiple sets", "key [key ...]"),
        ("sintercard", "7.0.0", "Intersect multiple sets and return the cardinality of the result",
            "numkeys:integer key [key ...] [LIMIT limit:integer]"),
        ("sinterstore", "1.0.0", "Intersect multiple sets and store the resulting set in a key",
            "destination key [key ...]"),
        ("sismember", "1.0.0", "Determine if a given value is a member of a set", "key member"),
        ("smembers", "1.0.0", "Get all the members in a set", "key"),
        ("smismember", "6.2.0", "Returns the membership associated with the given elements for a set",
            "key member [member ...]"),
        ("smove", "1.0.0", "Move a member from one set to another", "source destination member"),
        ("spop", "1.0.0", "Remove and return one or multiple random members from a set",
            "key [count:integer]"),
        ("srandmember", "1.0.0", "Get one or multiple random members from a set",
            "key [count:integer]"),
        ("srem", "1.0.0", "Remove one or more members from a set", "key member [member ...]"),
        ("sscan", "2.8.0", "Incrementally iterate Set elements",
            "key cursor:integer [MATCH pattern] [COUNT count:integer]"),
        ("sunion", "1.0.0", "Add multiple sets", "key [key ...]"),
        ("sunionstore", "1.0.0", "Add multiple sets and store the resulting set in a key",
            "destination key [key ...]"),
    ]),
    ("stream", &[
        ("xack", "5.0.0", "Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group. Return value of the command is the number of messages successfully acknowledged, that is, the IDs we were actually able to resolve in the PEL.",
            "key group id [id ...]"),
        ("xadd", "5.0.0", "Appends a new entry to a stream",
            "key [NOMKSTREAM] [<MAXLEN | MINID> [= | ~] threshold [LIMIT count:integer]] <* | id> field value [field value ...]"),
        ("xautoclaim", "6.2.0", "Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer.",
            "key group consumer min-idle-time start [COUNT count:integer] [JUSTID]"),
        ("xclaim", "5.0.0", "Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer.",
            "key group consumer min-idle-time id [id ...] [IDLE ms:integer] [TIME unix-time-milliseconds:integer] [RETRYCOUNT count:integer] [FORCE] [JUSTID] [LASTID lastid]"),
        ("xdel", "5.0.0", "Removes the specified entries from the stream. Returns the number of items actually deleted, that may be different from the number of IDs passed in case certain IDs do not exist.",
            "key id [id ...]"),
        ("xgroup", "5.0.0", "A container for consumer groups commands", ""),
        ("xgroup|create", "5.0.0", "Create a consumer group.",
            "key group <id | $> [MKSTREAM] [ENTRIESREAD entries-read:integer]"),
        ("xgroup|createconsumer", "6.2.0", "Create a consumer in a consumer group.",
            "key group consumer"),
        ("xgroup|delconsumer", "5.0.0", "Delete a consumer from a consumer group.",
            "key group consumer"),
        ("xgroup|destroy", "5.0.0", "Destroy a consumer group.", "key group"),
        ("xgroup|help", "5.0.0", "Show helpful text about the different subcommands", ""),
        ("xgroup|setid", "5.0.0", "Set a consumer group to an arbitrary last delivered ID value.",
            "key group <id | $> [ENTRIESREAD entries-read:integer]"),
        ("xinfo", "5.0.0", "A container for stream introspection commands", ""),
        ("xinfo|consumers", "5.0.0", "List the consumers in a consumer group", "key group"),
        ("xinfo|groups", "5.0.0", "List the consumer groups of a stream", "key"),
        ("xinfo|help", "5.0.0", "Show helpful text about the different subcommands", ""),
        ("xinfo|stream", "5.0.0", "Get information about a stream", "key [FULL [COUNT count:integer]]"),
        ("xlen", "5.0.0", "Return the number of entries in a stream", "key"),
        ("xpending", "5.0.0", "Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged.",
            "key group [[IDLE min-idle-time:integer] start end count:integer [consumer]]"),
        ("xrange", "5.0.0", "Return a range of elements in a stream, with IDs matching the specified IDs interval",
            "key start end [COUNT count:integer]"),
        ("xread", "5.0.0", "Return never seen elements in multiple streams, with IDs greater than the ones reported by the caller for each stream. Can block.",
            "[COUNT count:integer] [BLOCK milliseconds:integer] STREAMS key [key ...] id [id ...]"),
        ("xreadgroup", "5.0.0", "Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block.",
            "GROUP group consumer [COUNT count:integer] [BLOCK milliseconds:integer] [NOACK] STREAMS key [key ...] id [id ...]"),
        ("xrevrange", "5.0.0", "Return a range of elements in a stream, with IDs matching the specified IDs interval, in reverse order (from greater to smaller IDs) compared to XRANGE",
            "key end start [COUNT count:integer]"),
        ("xsetid", "5.0.0", "An internal command for replicating stream values",
            "key last-id [ENTRIESADDED entries-added:integer] [MAXDELETEDID max-deleted-id]"),
        ("xtrim", "5.0.0", "Trims the stream to (approximately if '~' is passed) a certain size",
            "key <MAXLEN | MINID> [= | ~] threshold [LIMIT count:integer]"),
    ]),
    ("geo", &[
        ("geoadd", "3.2.0", "Add one or more geospatial items in the geospatial index represented using a sorted set",
            "key [NX | XX] [CH] longitude:double latitude:double member [longitude:double latitude:double member ...]"),
        ("geodist", "3.2.0", "Returns the distance between two members of a geospatial index",
            "key member1 member2 [M | KM | FT | MI]"),
        ("geohash", "3.2.0", "Returns members of a geospatial index as standard geohash strings",
            "key [member [member ...]]"),
        ("geopos", "3.2.0", "Returns longitude and latitude of members of a geospatial index",
            "key [member [member ...]]"),
        ("georadius", "3.2.0", "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a point",
            "key longitude:double latitude:double radius:double <M | KM | FT | MI> [WITHCOORD] [WITHDIST] [WITHHASH] [COUNT count:integer [ANY]] [ASC | DESC] [STORE key | STOREDIST key]"),
        ("georadius_ro", "3.2.10", "A read-only variant for GEORADIUS",
            "key longitude:double latitude:double radius:double <M | KM | FT | MI> [WITHCOORD] [WITHDIST] [WITHHASH] [COUNT count:integer [ANY]] [ASC | DESC]"),
        ("georadiusbymember", "3.2.0", "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a member",
            "key member radius:double <M | KM | FT | MI> [WITHCOORD] [WITHDIST] [WITHHASH] [COUNT count:integer [ANY]] [ASC | DESC] [STORE key | STOREDIST key]"),
        ("georadiusbymember_ro", "3.2.10", "A read-only variant for GEORADIUSBYMEMBER",
            "key member radius:double <M | KM | FT | MI> [WITHCOORD] [WITHDIST] [WITHHASH] [COUNT count:integer [ANY]] [ASC | DESC]"),
        ("geosearch", "6.2.0", "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle.",
            "key <FROMMEMBER member | FROMLONLAT longitude:double latitude:double> <BYRADIUS radius:double <M | KM | FT | MI> | BYBOX width:double height:double <M | KM | FT | MI>> [ASC | DESC] [COUNT count:integer [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]"),
        ("geosearchstore", "6.2.0", "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle, and store the result in another key.",
            "destination source <FROMMEMBER member | FROMLONLAT longitude:double latitude:double> <BYRADIUS radius:double <M | KM | FT | MI> | BYBOX width:double height:double <M | KM | FT | MI>> [ASC | DESC] [COUNT count:integer [ANY]] [STOREDIST]"),
    ]),
    ("pubsub", &[
        ("psubscribe", "2.0.0", "Listen for messages published to channels matching the given patterns",
            "pattern [pattern ...]"),
        ("publish", "2.0.0", "Post a message to a channel", "channel message"),
        ("pubsub", "2.8.0", "A container for Pub/Sub commands", ""),
        ("pubsub|channels", "2.8.0", "Return the active channels", "[pattern]"),
        ("pubsub|help", "6.2.0", "Show helpful text about the different subcommands", ""),
        ("pubsub|numpat", "2.8.0", "Get the count of unique patterns pattern subscriptions", ""),
        ("pubsub|numsub", "2.8.0", "Get the count of subscribers for channels",
            "[channel [channel ...]]"),
        ("pubsub|shardchannels", "7.0.0", "Return the active shard channels", "[pattern]"),
        ("pubsub|shardnumsub", "7.0.0", "Get the count of subscribers for shard channels",
            "[shardchannel [shardchannel ...]]"),
        ("punsubscribe", "2.0.0", "Stop listening for messages posted to channels matching the given patterns",
            "[pattern [pattern ...]]"),
        ("spublish", "7.0.0", "Post a message to a shard channel", "shardchannel message"),
        ("ssubscribe", "7.0.0", "Listen for messages published to the given shard channels",
            "shardchannel [shardchannel ...]"),
        ("subscribe", "2.0.0", "Listen for messages published to the given channels",
            "channel [channel ...]"),
        ("sunsubscribe", "7.0.0", "Stop listening for messages posted to the given shard channels",
            "[shardchannel [shardchannel ...]]"),
        ("unsubscribe", "2.0.0", "Stop listening for messages posted to the given channels",
            "[channel [channel ...]]"),
    ]),
    // Osprey's own commands (docs/queries.md); "since" is Osprey's version.
    ("search", &[
        ("sindex.create", "0.1.0", "Create a secondary index on a bin or on the records' keys",
            "index <KEY | BIN bin> <NUMERIC | STRING> [DEFAULT | LIST | MAPKEYS | MAPVALUES] [SET set | ALLSETS] [NAMESPACE namespace]"),
        ("sindex.drop", "0.1.0", "Drop a secondary index", "index [NAMESPACE namespace]"),
        ("sindex.list", "0.1.0", "List the secondary indexes", "[NAMESPACE namespace]"),
        ("sindex.query", "0.1.0", "Return the keys of records in a range of an index, in index order",
            "index min max [LIMIT offset:integer count:integer] [WITHBINS] [NAMESPACE namespace]"),
    ]),
    ("sorted-set", &[
        ("bzmpop", "7.0.0", "Remove and return members with scores in a sorted set or block until one is available",
            "timeout:double numkeys:integer key [key ...] <MIN | MAX> [COUNT count:integer]"),
        ("bzpopmax", "5.0.0", "Remove and return the member with the highest score from one or more sorted sets, or block until one is available",
            "key [key ...] timeout:double"),
        ("bzpopmin", "5.0.0", "Remove and return the member with the lowest score from one or more sorted sets, or block until one is available",
            "key [key ...] timeout:double"),
        ("zadd", "1.2.0", "Add one or more members to a sorted set, or update its score if it already exists",
            "key [NX | XX] [GT | LT] [CH] [INCR] score:double member [score:double member ...]"),
        ("zcard", "1.2.0", "Get the number of members in a sorted set", "key"),
        ("zcount", "2.0.0", "Count the members in a sorted set with scores within the given values",
            "key min:double max:double"),
        ("zdiff", "6.2.0", "Subtract multiple sorted sets",
            "numkeys:integer key [key ...] [WITHSCORES]"),
        ("zdiffstore", "6.2.0", "Subtract multiple sorted sets and store the resulting sorted set in a new key",
            "destination numkeys:integer key [key ...]"),
        ("zincrby", "1.2.0", "Increment the score of a member in a sorted set",
            "key increment:double member"),
        ("zinter", "6.2.0", "Intersect multiple sorted sets",
            "numkeys:integer key [key ...] [WEIGHTS weight:integer [weight:integer ...]] [AGGREGATE <SUM | MIN | MAX>] [WITHSCORES]"),
        ("zintercard", "7.0.0", "Intersect multiple sorted sets and return the cardinality of the result",
            "numkeys:integer key [key ...] [LIMIT limit:integer]"),
        ("zinterstore", "2.0.0", "Intersect multiple sorted sets and store the resulting sorted set in a new key",
            "destination numkeys:integer key [key ...] [WEIGHTS weight:integer [weight:integer ...]] [AGGREGATE <SUM | MIN | MAX>]"),
        ("zlexcount", "2.8.9", "Count the number of members in a sorted set between a given lexicographical range",
            "key min max"),
        ("zmscore", "6.2.0", "Get the score associated with the given members in a sorted set",
            "key member [member ...]"),
        ("zmpop", "7.0.0", "Remove and return members with scores in a sorted set",
            "numkeys:integer key [key ...] <MIN | MAX> [COUNT count:integer]"),
        ("zpopmax", "5.0.0", "Remove and return members with the highest scores in a sorted set",
            "key [count:integer]"),
        ("zpopmin", "5.0.0", "Remove and return members with the lowest scores in a sorted set",
            "key [count:integer]"),
        ("zrandmember", "6.2.0", "Get one or multiple random elements from a sorted set",
            "key [count:integer [WITHSCORES]]"),
        ("zrange", "1.2.0", "Return a range of members in a sorted set",
            "key start stop [BYSCORE | BYLEX] [REV] [LIMIT offset:integer count:integer] [WITHSCORES]"),
        ("zrangebylex", "2.8.9", "Return a range of members in a sorted set, by lexicographical range",
            "key min max [LIMIT offset:integer count:integer]"),
        ("zrangebyscore", "1.0.5", "Return a range of members in a sorted set, by score",
            "key min:double max:double [WITHSCORES] [LIMIT offset:integer count:integer]"),
        ("zrangestore", "6.2.0", "Store a range of members from sorted set into another key",
            "dst:key src:key min max [BYSCORE | BYLEX] [REV] [LIMIT offset:integer count:integer]"),
        ("zrank", "2.0.0", "Determine the index of a member in a sorted set",
            "key member [WITHSCORE]"),
        ("zrem", "1.2.0", "Remove one or more members from a sorted set",
            "key member [member ...]"),
        ("zremrangebylex", "2.8.9", "Remove all members in a sorted set between the given lexicographical range",
            "key min max"),
        ("zremrangebyrank", "2.0.0", "Remove all members in a sorted set within the given indexes",
            "key start:integer stop:integer"),
        ("zremrangebyscore", "1.2.0", "Remove all members in a sorted set within the given scores",
            "key min:double max:double"),
        ("zrevrange", "1.2.0", "Return a range of members in a sorted set, by index, with scores ordered from high to low",
            "key start:integer stop:integer [WITHSCORES]"),
        ("zrevrangebylex", "2.8.9", "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.",
            "key max min [LIMIT offset:integer count:integer]"),
        ("zrevrangebyscore", "2.2.0", "Return a range of members in a sorted set, by score, with scores ordered from high to low",
            "key max:double min:double [WITHSCORES] [LIMIT offset:integer count:integer]"),
        ("zrevrank", "2.0.0", "Determine the index of a member in a sorted set, with scores ordered from high to low",
            "key member [WITHSCORE]"),
        ("zscan", "2.8.0", "Incrementally iterate sorted sets elements and associated scores",
            "key cursor:integer [MATCH pattern] [COUNT count:integer]"),
        ("zscore", "1.2.0", "Get the score associated with the given member in a sorted set",
            "key member"),
        ("zunion", "6.2.0", "Add multiple sorted sets",
            "numkeys:integer key [key ...] [WEIGHTS weight:integer [weight:integer ...]] [AGGREGATE <SUM | MIN | MAX>] [WITHSCORES]"),
        ("zunionstore", "2.0.0", "Add multiple sorted sets and store the resulting sorted set in a new key",
            "destination numkeys:integer key [key ...] [WEIGHTS weight:integer [weight:integer ...]] [AGGREGATE <SUM | MIN | MAX>]"),
    ]),
];

/// Argument types a `:type` suffix may name.
const TYPES: &[&str] = &["key", "string", "integer", "double", "pattern", "unix-time"];

/// Argument names that are keys without a suffix.
const KEY_NAMES: &[&str] = &["key", "newkey", "source", "destination"];

/// Every documented command by lower-case name, with its group.
static BY_NAME: LazyLock<HashMap<&'static str, (&'static str, Doc)>> = LazyLock::new(|| {
    GROUPS
        .iter()
        .flat_map(|&(group, docs)| docs.iter().map(move |&doc| (doc.0, (group, doc))))
        .collect()
});

/// The name of every documented subcommand (`container|subcommand`), in table order.
pub(super) fn subcommand_names() -> impl Iterator<Item = &'static str> {
    GROUPS
        .iter()
        .flat_map(|(_, docs)| docs.iter().map(|doc| doc.0))
        .filter(|name| name.contains('|'))
}

/// COMMAND DOCS [name ...]: a map from command name to its documentation; every command for
/// no name; unknown names are skipped, as Redis does.
pub fn command_docs(args: &Args, reply: &mut Reply<'_>) {
    let found: Vec<(&str, Doc)> = if args.len() <= 2 {
        commands::names()
            .filter_map(|name| BY_NAME.get(name).copied())
            .collect()
    } else {
        (2..args.len())
            .filter_map(|position| {
                let name = String::from_utf8_lossy(args.get(position)).to_ascii_lowercase();
                BY_NAME.get(name.as_str()).copied()
            })
            .collect()
    };
    reply.map(found.len());
    for (group, doc) in found {
        reply.bulk(doc.0.as_bytes());
        write_doc(reply, group, doc);
    }
}

/// One command's documentation map: summary, since, group, arguments, subcommands.
fn write_doc(reply: &mut Reply<'_>, group: &str, doc: Doc) {
    let (name, since, summary, syntax) = doc;
    let arguments = parse(syntax).unwrap_or_default();
    let prefix = format!("{name}|");
    let subcommands: Vec<Doc> = GROUPS
        .iter()
        .flat_map(|&(_, docs)| docs.iter().copied())
        .filter(|subcommand| subcommand.0.starts_with(&prefix))
        .collect();
    reply.map(3 + usize::from(!arguments.is_empty()) + usize::from(!subcommands.is_empty()));
    for (field, value) in [("summary", summary), ("since", since), ("group", group)] {
        reply.bulk(field.as_bytes());
        reply.bulk(value.as_bytes());
    }
    if !arguments.is_empty() {
        reply.bulk(b"arguments");
        write_arguments(reply, &arguments, &mut 0);
    }
    if !subcommands.is_empty() {
        reply.bulk(b"subcommands");
        reply.map(subcommands.len());
        for subcommand in subcommands {
            reply.bulk(subcommand.0.as_bytes());
            write_doc(reply, group, subcommand);
        }
    }
}

/// An `arguments` array; `key_index` numbers the key arguments in order (`key_spec_index`).
fn write_arguments(reply: &mut Reply<'_>, arguments: &[Argument], key_index: &mut i64) {
    reply.array(arguments.len());
    for argument in arguments {
        let flags: Vec<&str> = [
            (argument.optional, "optional"),
            (argument.multiple, "multiple"),
        ]
        .into_iter()
        .filter_map(|(set, flag)| set.then_some(flag))
        .collect();
        let is_key = argument.kind == "key";
        reply.map(
            2 + usize::from(is_key)
                + usize::from(argument.token.is_some())
                + usize::from(!flags.is_empty())
                + usize::from(!argument.arguments.is_empty()),
        );
        reply.bulk(b"name");
        reply.bulk(argument.name.as_bytes());
        reply.bulk(b"type");
        reply.bulk(argument.kind.as_bytes());
        if is_key {
            reply.bulk(b"key_spec_index");
            reply.integer(*key_index);
            *key_index += 1;
        }
        if let Some(token) = argument.token {
            reply.bulk(b"token");
            reply.bulk(token.as_bytes());
        }
        if !flags.is_empty() {
            reply.bulk(b"flags");
            reply.set(flags.len());
            flags.iter().for_each(|flag| reply.simple(flag));
        }
        if !argument.arguments.is_empty() {
            reply.bulk(b"arguments");
            write_arguments(reply, &argument.arguments, key_index);
        }
    }
}

/// One argument of a command, as COMMAND DOCS describes it.
#[derive(Debug, Clone, PartialEq)]
struct Argument {
    name: String,
    /// `key`, `string`, `integer`, `double`, `pattern`, `unix-time`, `pure-token`, `oneof`
    /// or `block`.
    kind: &'static str,
    /// The literal word that introduces the argument (or is the whole argument).
    token: Option<&'static str>,
    optional: bool,
    multiple: bool,
    /// The alternatives of a `oneof`, the parts of a `block`.
    arguments: Vec<Argument>,
}

impl Argument {
    /// A literal word on its own (`NX`).
    fn pure_token(token: &'static str) -> Argument {
        Argument::new(token.to_ascii_lowercase(), "pure-token", Vec::new()).with_token(token)
    }

    /// A named value, typed by its name or a `:type` suffix.
    fn value(word: &str) -> Result<Argument, String> {
        let (name, kind) = match word.split_once(':') {
            Some((name, kind)) => match TYPES.iter().find(|&&known| known == kind) {
                Some(kind) => (name, *kind),
                None => return Err(format!("unknown type in '{word}'")),
            },
            None if KEY_NAMES.contains(&word) => (word, "key"),
            None if word == "pattern" => (word, "pattern"),
            None if word.starts_with("unix-time") => (word, "unix-time"),
            None => (word, "string"),
        };
        if name.is_empty() {
            return Err(format!("no name in '{word}'"));
        }
        Ok(Argument::new(name.to_owned(), kind, Vec::new()))
    }

    /// A `oneof` or `block` of `arguments`, named after them as Redis names such arguments.
    fn compound(kind: &'static str, arguments: Vec<Argument>) -> Result<Argument, String> {
        if arguments.is_empty() {
            return Err("empty group".to_owned());
        }
        let names: Vec<&str> = arguments
            .iter()
            .map(|argument| argument.name.as_str())
            .collect();
        Ok(Argument::new(names.join("_"), kind, arguments))
    }

    fn new(name: String, kind: &'static str, arguments: Vec<Argument>) -> Argument {
        Argument {
            name,
            kind,
            token: None,
            optional: false,
            multiple: false,
            arguments,
        }
    }

    fn with_token(mut self, token: &'static str) -> Argument {
        self.token = Some(token);
        self
    }
}

/// A piece of syntax before it becomes arguments.
#[derive(Debug)]
enum Node {
    /// An UPPER-CASE literal word.
    Token(&'static str),
    /// A named value.
    Value(&'static str),
    /// `...`: the optional group it ends repeats what precedes the group.
    Repeat,
    /// `[...]` (optional) or `<...>`: alternatives separated by `|`.
    Group {
        optional: bool,
        alternatives: Vec<Vec<Node>>,
    },
}

/// The arguments a syntax describes.
fn parse(syntax: &'static str) -> Result<Vec<Argument>, String> {
    let mut words = lex(syntax).into_iter();
    let mut alternatives = parse_alternatives(&mut words, None)?;
    match alternatives.pop() {
        Some(nodes) if alternatives.is_empty() => sequence(nodes),
        _ => Err(format!("'|' outside a group in '{syntax}'")),
    }
}

/// Words, and `[`, `]`, `<`, `>`, `|` on their own.
fn lex(syntax: &'static str) -> Vec<&'static str> {
    let mut words = Vec::new();
    let mut start = 0;
    for (position, character) in syntax.char_indices() {
        let is_delimiter = matches!(character, '[' | ']' | '<' | '>' | '|');
        if is_delimiter || character.is_whitespace() {
            if start < position {
                words.push(&syntax[start..position]);
            }
            if is_delimiter {
                words.push(&syntax[position..position + 1]);
            }
            start = position + character.len_utf8();
        }
    }
    if start < syntax.len() {
        words.push(&syntax[start..]);
    }
    words
}

/// Sequences separated by `|`, up to `close` (`]`, `>`, or the end for `None`).
fn parse_alternatives(
    words: &mut impl Iterator<Item = &'static str>,
    close: Option<&str>,
) -> Result<Vec<Vec<Node>>, String> {
    let mut alternatives = vec![Vec::new()];
    loop {
        let word = words.next();
        if word == close {
            return Ok(alternatives);
        }
        let node = match word {
            None => return Err(format!("missing '{}'", close.unwrap_or_default())),
            Some("|") => {
                alternatives.push(Vec::new());
                continue;
            }
            Some("[") => Node::Group {
                optional: true,
                alternatives: parse_alternatives(words, Some("]"))?,
            },
            Some("<") => Node::Group {
                optional: false,
                alternatives: parse_alternatives(words, Some(">"))?,
            },
            Some(word @ ("]" | ">")) => return Err(format!("unexpected '{word}'")),
            Some("...") => Node::Repeat,
            Some(word) if is_token(word) => Node::Token(word),
            Some(word) => Node::Value(word),
        };
        alternatives
            .last_mut()
            .expect("starts with one alternative")
            .push(node);
    }
}

/// Whether a word is a literal token: upper-case letters, digits and dashes.
fn is_token(word: &str) -> bool {
    word.starts_with(|character: char| character.is_ascii_uppercase())
        && word.chars().all(|character| {
            character.is_ascii_uppercase() || character.is_ascii_digit() || character == '-'
        })
}

/// The arguments of a sequence of nodes.
fn sequence(nodes: Vec<Node>) -> Result<Vec<Argument>, String> {
    let mut arguments = Vec::new();
    for node in nodes {
        match node {
            Node::Token(token) => arguments.push(Argument::pure_token(token)),
            Node::Value(word) => arguments.push(Argument::value(word)?),
            Node::Repeat => return Err("'...' outside '[x ...]'".to_owned()),
            Node::Group {
                optional: true,
                mut alternatives,
            } if alternatives.len() == 1
                && matches!(
                    alternatives.first().and_then(|nodes| nodes.last()),
                    Some(Node::Repeat)
                ) =>
            {
                let mut nodes = alternatives.pop().expect("one alternative");
                nodes.pop();
                repeat(&mut arguments, sequence(nodes)?)?;
            }
            Node::Group {
                optional,
                alternatives,
            } => {
                let mut argument = one_of(alternatives)?;
                argument.optional = optional;
                arguments.push(argument);
            }
        }
    }
    Ok(arguments)
}

/// `x [x ...]`: the arguments just before the repeated ones, marked `multiple`.
fn repeat(arguments: &mut Vec<Argument>, mut repeated: Vec<Argument>) -> Result<(), String> {
    let count = repeated.len();
    let start = arguments.len().checked_sub(count).filter(|_| count > 0);
    if start.is_none_or(|start| arguments[start..] != repeated[..]) {
        return Err("'[x ...]' does not follow x".to_owned());
    }
    arguments.truncate(arguments.len() - count);
    let mut argument = match repeated.pop() {
        Some(single) if count == 1 => single,
        Some(last) => {
            repeated.push(last);
            Argument::compound("block", repeated)?
        }
        None => return Err("empty repeat".to_owned()),
    };
    argument.multiple = true;
    arguments.push(argument);
    Ok(())
}

/// One argument for a group: the group itself for one alternative, else a `oneof`.
fn one_of(mut alternatives: Vec<Vec<Node>>) -> Result<Argument, String> {
    if alternatives.len() == 1 {
        return group(alternatives.pop().expect("one alternative"));
    }
    let arguments = alternatives
        .into_iter()
        .map(group)
        .collect::<Result<_, _>>()?;
    Argument::compound("oneof", arguments)
}

/// One argument for a sequence: `TOKEN value` is the value introduced by the token,
/// `TOKEN a b` a block introduced by it, a single argument itself, else a block.
fn group(mut nodes: Vec<Node>) -> Result<Argument, String> {
    let token = match nodes.first() {
        Some(Node::Token(token)) if nodes.len() > 1 => Some(*token),
        _ => None,
    };
    if token.is_some() {
        nodes.remove(0);
    }
    let mut arguments = sequence(nodes)?;
    let mut argument = match arguments.pop() {
        Some(single) if arguments.is_empty() && (token.is_none() || single.token.is_none()) => {
            single
        }
        Some(last) => {
            arguments.push(last);
            Argument::compound("block", arguments)?
        }
        None => return Err("empty group".to_owned()),
    };
    if token.is_some() {
        argument.token = token;
    }
    Ok(argument)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Flags and structure of an argument, compactly: `name:type[:TOKEN][?][*]{...}`.
    fn show(arguments: &[Argument]) -> String {
        let shown: Vec<String> = arguments
            .iter()
            .map(|argument| {
                let mut text = format!("{}:{}", argument.name, argument.kind);
                if let Some(token) = argument.token {
                    text += &format!(":{token}");
                }
                if argument.optional {
                    text += "?";
                }
                if argument.multiple {
                    text += "*";
                }
                if !argument.arguments.is_empty() {
                    text += &format!("{{{}}}", show(&argument.arguments));
                }
                text
            })
            .collect();
        shown.join(" ")
    }

    fn parsed(syntax: &'static str) -> String {
        show(&parse(syntax).expect("valid syntax"))
    }

    #[test]
    fn every_command_has_docs_and_every_syntax_parses() {
        for name in commands::names() {
            assert!(
                BY_NAME.contains_key(name),
                "no COMMAND DOCS entry for {name}"
            );
        }
        for (name, (_, doc)) in BY_NAME.iter() {
            let container = name.split('|').next().unwrap_or_default();
            assert!(
                commands::names().any(|served| served == container),
                "{name} is not served"
            );
            assert!(parse(doc.3).is_ok(), "{name}: {:?}", parse(doc.3));
        }
        assert_eq!(
            BY_NAME.len(),
            GROUPS.iter().map(|(_, docs)| docs.len()).sum::<usize>()
        );
    }

    #[test]
    fn parses_redis_argument_shapes() {
        assert_eq!(
            parsed("key field value [field value ...]"),
            "key:key field_value:block*{field:string value:string}"
        );
        assert_eq!(parsed("key [key ...]"), "key:key*");
        assert_eq!(
            parsed("key value [NX | XX] [GET] [EX seconds:integer | KEEPTTL]"),
            "key:key value:string nx_xx:oneof?{nx:pure-token:NX xx:pure-token:XX} \
             get:pure-token:GET? seconds_keepttl:oneof?{seconds:integer:EX keepttl:pure-token:KEEPTTL}"
        );
        assert_eq!(
            parsed("key min max [LIMIT offset:integer count:integer]"),
            "key:key min:string max:string offset_count:block:LIMIT?{offset:integer count:integer}"
        );
        assert_eq!(
            parsed("key <BEFORE | AFTER> pivot"),
            "key:key before_after:oneof{before:pure-token:BEFORE after:pure-token:AFTER} pivot:string"
        );
        assert_eq!(
            parsed("[TYPE <A | B>] [ID id:integer [id:integer ...]]"),
            "a_b:oneof:TYPE?{a:pure-token:A b:pure-token:B} id:integer:ID?*"
        );
        assert_eq!(parsed("[section [section ...]]"), "section:string?*");
        assert_eq!(parsed(""), "");
    }

    #[test]
    fn rejects_malformed_syntax() {
        for syntax in ["[key", "key]", "a | b", "[key ...]", "x:float", "[]", "..."] {
            assert!(parse(syntax).is_err(), "{syntax}");
        }
    }
}
