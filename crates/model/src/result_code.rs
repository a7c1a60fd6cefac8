//! Result codes, numbered as Aerospike numbers them (`AS_ERR_*` in the server's `proto.h`).

/// The outcome of a command as the Aerospike wire reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ResultCode {
    /// Success.
    Ok = 0,
    /// Generic server error.
    Unknown = 1,
    /// The record does not exist (or has expired).
    NotFound = 2,
    /// The generation check failed.
    Generation = 3,
    /// The request is malformed or has a bad argument.
    Parameter = 4,
    /// Create-only write on an existing record.
    RecordExists = 5,
    /// The bin already exists.
    BinExists = 6,
    /// A change for a partition carried an older version than the receiver's (a deposed
    /// master), or reached a node that is no longer a replica of the partition.
    ClusterKeyMismatch = 7,
    /// The namespace is out of memory or space (stop-writes).
    OutOfSpace = 8,
    /// The server-side deadline passed.
    Timeout = 9,
    /// The partition is not available on this node.
    Unavailable = 11,
    /// The op does not fit the bin's type.
    IncompatibleType = 12,
    /// The record would exceed the record size limit.
    RecordTooBig = 13,
    /// Too many concurrent operations on one record.
    KeyBusy = 14,
    /// The scan or query was aborted by an operator (`query-abort`); AS_ERR_QUERY_ABORT.
    QueryAborted = 15,
    /// The feature is not supported by this server.
    UnsupportedFeature = 16,
    /// The bin does not exist.
    BinNotFound = 17,
    /// The device cannot keep up: too many write blocks wait to be written.
    DeviceOverload = 18,
    /// The sent key differs from the stored key.
    KeyMismatch = 19,
    /// The namespace is missing or unknown.
    Namespace = 20,
    /// The bin name is empty or too long.
    BinName = 21,
    /// Forbidden by configuration.
    Forbidden = 22,
    /// A collection op found no element where it needed one (a map update-only put of a
    /// missing key, a list index out of bounds).
    ElementNotFound = 23,
    /// A collection op found an element it may not overwrite (create-only, add-unique).
    ElementExists = 24,
    /// Enterprise-only feature requested.
    EnterpriseOnly = 25,
    /// A collection op that does not apply to the value it reached (an increment of a
    /// non-number element, an op on an ordered list by index that would break its order).
    OpNotApplicable = 26,
    /// The filter expression excluded the record.
    FilteredOut = 27,
    /// The security (login) protocol is not supported.
    SecurityNotSupported = 51,
    /// The connection has not logged in (security is on).
    NotAuthenticated = 80,
    /// The user's roles do not allow the request.
    RoleViolation = 81,
    /// The client's address is in no allow-list of the user's roles.
    NotWhitelisted = 82,
    /// The user's roles' quota of requests per second is spent.
    QuotaExceeded = 83,
    /// A UDF failed (its error is in the reply's `FAILURE` bin).
    UdfBadResponse = 100,
    /// A batch has more rows than `batch-max-requests` allows.
    BatchMaxRequests = 151,
    /// A GeoJSON value (a bin write's particle) is not valid GeoJSON (`AS_ERR_GEO_INVALID_GEOJSON`).
    GeoInvalidGeojson = 160,
    /// The secondary index a query names does not exist.
    IndexNotFound = 201,
    /// The secondary index a query needs is still being built.
    IndexNotReadable = 203,
}

impl ResultCode {
    /// The numeric code on the wire.
    pub fn code(self) -> u8 {
        self as u8
    }
}
