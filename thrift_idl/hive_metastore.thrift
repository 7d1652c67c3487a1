// Hive Metastore Thrift API as served by waggle.
//
// This is the union of the metastore interfaces of Hive 2.3, 3.1 and 4.x, so
// that clients built against any of them can talk to us.  Names, field ids,
// types, requiredness and defaults follow the upstream wire contract; the
// grouping and comments are ours.  Where releases disagree on a field id the
// newest layout wins (see the notes next to the affected items).  Items that
// newer releases dropped are kept and marked as legacy.
//
// Regenerate the Python bindings with thrift_idl/generate.sh after editing.

include "fb303.thrift"

namespace py waggle.hms.gen.hive_metastore

// ==========================================================================
// Constants
// ==========================================================================

const string DDL_TIME = "transient_lastDdlTime"

// Access types reported in Table.accessType
const i8 ACCESSTYPE_NONE = 1
const i8 ACCESSTYPE_READONLY = 2
const i8 ACCESSTYPE_WRITEONLY = 4
const i8 ACCESSTYPE_READWRITE = 8

// Filter keys understood by get_table_names_by_filter and friends
const string HIVE_FILTER_FIELD_OWNER = "hive_filter_field_owner__"
const string HIVE_FILTER_FIELD_PARAMS = "hive_filter_field_params__"
const string HIVE_FILTER_FIELD_LAST_ACCESS = "hive_filter_field_last_access__"
const string HIVE_FILTER_FIELD_TABLE_NAME = "hive_filter_field_tableName__"
const string HIVE_FILTER_FIELD_TABLE_TYPE = "hive_filter_field_tableType__"

// Well-known table and partition parameter keys
const string IS_ARCHIVED = "is_archived"
const string ORIGINAL_LOCATION = "original_location"
const string IS_IMMUTABLE = "immutable"
const string META_TABLE_COLUMNS = "columns"
const string META_TABLE_COLUMN_TYPES = "columns.types"
const string BUCKET_FIELD_NAME = "bucket_field_name"
const string BUCKET_COUNT = "bucket_count"
const string FIELD_TO_DIMENSION = "field_to_dimension"
const string IF_PURGE = "ifPurge"
const string META_TABLE_NAME = "name"
const string META_TABLE_DB = "db"
const string META_TABLE_LOCATION = "location"
const string META_TABLE_SERDE = "serde"
const string META_TABLE_PARTITION_COLUMNS = "partition_columns"
const string META_TABLE_PARTITION_COLUMN_TYPES = "partition_columns.types"
const string FILE_INPUT_FORMAT = "file.inputformat"
const string FILE_OUTPUT_FORMAT = "file.outputformat"
const string META_TABLE_STORAGE = "storage_handler"
const string TABLE_IS_TRANSACTIONAL = "transactional"
const string NO_AUTO_COMPACT = "no_auto_compaction"
const string TABLE_TRANSACTIONAL_PROPERTIES = "transactional_properties"
const string TABLE_BUCKETING_VERSION = "bucketing_version"
const string DRUID_CONFIG_PREFIX = "druid."
const string JDBC_CONFIG_PREFIX = "hive.sql."
const string TABLE_IS_CTAS = "created_with_ctas"
const string TABLE_IS_CTLT = "created_with_ctlt"
const string PARTITION_TRANSFORM_SPEC = "partition_transform_spec"
const string NO_CLEANUP = "no_cleanup"
const string CTAS_LEGACY_CONFIG = "create_table_as_external"
const string DEFAULT_TABLE_TYPE = "defaultTableType"
const string TXN_ID = "txnId"
const string WRITE_ID = "writeId"
const string EXPECTED_PARAMETER_KEY = "expected_parameter_key"
const string EXPECTED_PARAMETER_VALUE = "expected_parameter_value"
const string TABLE_NO_AUTO_COMPACT = "no_auto_compaction"  // legacy spelling of NO_AUTO_COMPACT

// ==========================================================================
// Enumerations
// ==========================================================================

// -- Principals and privileges

enum PrincipalType {
  USER = 1,
  ROLE = 2,
  GROUP = 3,
}

enum HiveObjectType {
  GLOBAL = 1,
  DATABASE = 2,
  TABLE = 3,
  PARTITION = 4,
  COLUMN = 5,
  DATACONNECTOR = 6,
}

enum GrantRevokeType {
  GRANT = 1,
  REVOKE = 2,
}

// -- Databases, tables, partitions

enum DatabaseType {
  NATIVE = 1,
  REMOTE = 2,
}

enum PartitionEventType {
  LOAD_DONE = 1,
}

enum PartitionFilterMode {
  BY_NAMES = 0,
  BY_VALUES = 1,
  BY_EXPR = 2,
}

enum GetTablesExtRequestFields {
  ACCESS_TYPE = 1,
  PROCESSOR_CAPABILITIES = 2,
  ALL = 2147483647,
}

enum ClientCapability {
  TEST_CAPABILITY = 1,
  INSERT_ONLY_TABLES = 2,
}

enum FunctionType {
  JAVA = 1,
}

enum ResourceType {
  JAR = 1,
  FILE = 2,
  ARCHIVE = 3,
}

enum FileMetadataExprType {
  ORC_SARG = 1,
}

// -- Transactions, locks and compaction

enum TxnState {
  COMMITTED = 1,
  ABORTED = 2,
  OPEN = 3,
}

enum TxnType {
  DEFAULT = 0,
  REPL_CREATED = 1,
  READ_ONLY = 2,
  COMPACTION = 3,
  MATER_VIEW_REBUILD = 4,
  SOFT_DELETE = 5,
  REBALANCE_COMPACTION = 6,
}

enum LockLevel {
  DB = 1,
  TABLE = 2,
  PARTITION = 3,
}

enum LockState {
  ACQUIRED = 1,
  WAITING = 2,
  ABORT = 3,
  NOT_ACQUIRED = 4,
}

enum LockType {
  SHARED_READ = 1,
  SHARED_WRITE = 2,
  EXCLUSIVE = 3,
  EXCL_WRITE = 4,
}

enum DataOperationType {
  SELECT = 1,
  INSERT = 2,
  UPDATE = 3,
  DELETE = 4,
  UNSET = 5,
  NO_TXN = 6,
}

enum EventRequestType {
  INSERT = 1,
  UPDATE = 2,
  DELETE = 3,
}

enum CompactionType {
  MINOR = 1,
  MAJOR = 2,
  REBALANCE = 3,
  ABORT_TXN_CLEANUP = 4,
}

enum CompactionMetricsMetricType {
  NUM_OBSOLETE_DELTAS = 0,
  NUM_DELTAS = 1,
  NUM_SMALL_DELTAS = 2,
}

// -- Schema registry

enum SerdeType {
  HIVE = 1,
  SCHEMA_REGISTRY = 2,
}

enum SchemaType {
  HIVE = 1,
  AVRO = 2,
}

enum SchemaCompatibility {
  NONE = 1,
  BACKWARD = 2,
  FORWARD = 3,
  BOTH = 4,
}

enum SchemaValidation {
  LATEST = 1,
  ALL = 2,
}

enum SchemaVersionState {
  INITIATED = 1,
  START_REVIEW = 2,
  CHANGES_REQUIRED = 3,
  REVIEWED = 4,
  ENABLED = 5,
  DISABLED = 6,
  ARCHIVED = 7,
  DELETED = 8,
}

// -- Workload management

enum WMResourcePlanStatus {
  ACTIVE = 1,
  ENABLED = 2,
  DISABLED = 3,
}

enum WMPoolSchedulingPolicy {
  FAIR = 1,
  FIFO = 2,
}

// -- Scheduled queries

enum ScheduledQueryMaintenanceRequestType {
  CREATE = 1,
  ALTER = 2,
  DROP = 3,
}

enum QueryState {
  INITED = 0,
  EXECUTING = 1,
  FAILED = 2,
  FINISHED = 3,
  TIMED_OUT = 4,
  AUTO_DISABLED = 5,
}

// ==========================================================================
// Exceptions (each carries a single message)
// ==========================================================================

exception MetaException { 1: string message }
exception UnknownTableException { 1: string message }
exception UnknownDBException { 1: string message }
exception AlreadyExistsException { 1: string message }
exception InvalidPartitionException { 1: string message }
exception UnknownPartitionException { 1: string message }
exception InvalidObjectException { 1: string message }
exception NoSuchObjectException { 1: string message }
exception InvalidOperationException { 1: string message }
exception ConfigValSecurityException { 1: string message }
exception InvalidInputException { 1: string message }
exception NoSuchTxnException { 1: string message }
exception TxnAbortedException { 1: string message }
exception TxnOpenException { 1: string message }
exception NoSuchLockException { 1: string message }
exception CompactionAbortedException { 1: string message }
exception NoSuchCompactionException { 1: string message }
exception IndexAlreadyExistsException { 1: string message }  // Hive 2.x only.

// ==========================================================================
// Basic building blocks
// ==========================================================================

struct Version {
  1: string version
  2: string comments
}

struct FieldSchema {
  1: string name
  2: string type
  3: string comment
}

struct EnvironmentContext {
  1: map<string, string> properties
}

struct Type {
  1: string name
  2: optional string type1
  3: optional string type2
  4: optional list<FieldSchema> fields
}

struct Schema {
  1: list<FieldSchema> fieldSchemas
  2: map<string, string> properties
}

struct Order {
  1: string col
  2: i32 order
}

struct SkewedInfo {
  1: list<string> skewedColNames
  2: list<list<string>> skewedColValues
  3: map<list<string>, string> skewedColValueLocationMaps
}

struct SerDeInfo {
  1: string name
  2: string serializationLib
  3: map<string, string> parameters
  4: optional string description
  5: optional string serializerClass
  6: optional string deserializerClass
  7: optional SerdeType serdeType
}

struct StorageDescriptor {
  1: list<FieldSchema> cols
  2: string location
  3: string inputFormat
  4: string outputFormat
  5: bool compressed
  6: i32 numBuckets
  7: SerDeInfo serdeInfo
  8: list<string> bucketCols
  9: list<Order> sortCols
  10: map<string, string> parameters
  11: optional SkewedInfo skewedInfo
  12: optional bool storedAsSubDirectories
}

struct FileMetadata {
  1: i8 type = 1
  2: i8 version = 1
  3: list<binary> data
}

struct ObjectDictionary {
  1: required map<string, list<binary>> values
}

struct ClientCapabilities {
  1: required list<ClientCapability> values
}

struct GetProjectionsSpec {
  1: list<string> fieldList
  2: string includeParamKeyPattern
  3: string excludeParamKeyPattern
}

// ==========================================================================
// Catalogs, databases and data connectors
// ==========================================================================

struct Catalog {
  1: string name
  2: optional string description
  3: string locationUri
  4: optional i32 createTime
}

struct CreateCatalogRequest {
  1: Catalog catalog
}

struct AlterCatalogRequest {
  1: string name
  2: Catalog newCat
}

struct GetCatalogRequest {
  1: string name
}

struct GetCatalogResponse {
  1: Catalog catalog
}

struct GetCatalogsResponse {
  1: list<string> names
}

struct DropCatalogRequest {
  1: string name
}

struct Database {
  1: string name
  2: string description
  3: string locationUri
  4: map<string, string> parameters
  5: optional PrincipalPrivilegeSet privileges
  6: optional string ownerName
  7: optional PrincipalType ownerType
  8: optional string catalogName
  9: optional i32 createTime
  10: optional string managedLocationUri
  11: optional DatabaseType type
  12: optional string connector_name
  13: optional string remote_dbname
}

struct CreateDatabaseRequest {
  1: required string databaseName
  2: optional string description
  3: optional string locationUri
  4: optional map<string, string> parameters
  5: optional PrincipalPrivilegeSet privileges
  6: optional string ownerName
  7: optional PrincipalType ownerType
  8: optional string catalogName
  9: optional i32 createTime
  10: optional string managedLocationUri
  11: optional DatabaseType type  // a string in Hive 4.0 alphas
  12: optional string dataConnectorName
  13: optional string remote_dbname
}

struct GetDatabaseRequest {
  1: optional string name
  2: optional string catalogName
  3: optional list<string> processorCapabilities
  4: optional string processorIdentifier
}

struct AlterDatabaseRequest {
  1: required string oldDbName
  2: required Database newDb
}

struct DropDatabaseRequest {
  1: required string name
  2: optional string catalogName
  3: required bool ignoreUnknownDb
  4: required bool deleteData
  5: required bool cascade
  6: optional bool softDelete = false
  7: optional i64 txnId = 0
  8: optional bool deleteManagedDir = true
}

struct DataConnector {
  1: string name
  2: string type
  3: string url
  4: optional string description
  5: optional map<string, string> parameters
  6: optional string ownerName
  7: optional PrincipalType ownerType
  8: optional i32 createTime
}

struct CreateDataConnectorRequest {
  1: required DataConnector connector
}

struct GetDataConnectorRequest {
  1: required string connectorName
}

struct AlterDataConnectorRequest {
  1: required string connectorName
  2: required DataConnector newConnector
}

struct DropDataConnectorRequest {
  1: required string connectorName
  2: optional bool ifNotExists
  3: optional bool checkReferences
}

// ==========================================================================
// Tables and views
// ==========================================================================

struct Table {
  1: string tableName
  2: string dbName
  3: string owner
  4: i32 createTime
  5: i32 lastAccessTime
  6: i32 retention
  7: StorageDescriptor sd
  8: list<FieldSchema> partitionKeys
  9: map<string, string> parameters
  10: string viewOriginalText
  11: string viewExpandedText
  12: string tableType
  13: optional PrincipalPrivilegeSet privileges
  14: optional bool temporary = false
  15: optional bool rewriteEnabled
  16: optional CreationMetadata creationMetadata  // Hive 2.3.10 put a string catName here
  17: optional string catName
  18: optional PrincipalType ownerType = PrincipalType.USER
  19: optional i64 writeId = -1
  20: optional bool isStatsCompliant
  21: optional ColumnStatistics colStats
  22: optional i8 accessType
  23: optional list<string> requiredReadCapabilities
  24: optional list<string> requiredWriteCapabilities
  25: optional i64 id
  26: optional FileMetadata fileMetadata
  27: optional ObjectDictionary dictionary
  28: optional i64 txnId
}

struct CreationMetadata {
  1: required string catName
  2: required string dbName
  3: required string tblName
  4: required set<string> tablesUsed
  5: optional string validTxnList
  6: optional i64 materializationTime
  7: optional list<SourceTable> sourceTables
}

struct SourceTable {
  1: required Table table
  2: required i64 insertedCount
  3: required i64 updatedCount
  4: required i64 deletedCount
}

// Current layout. Older 3.x builds (e.g. hive-metastore-client) used
// 1: set<string> tablesUsed, 2: string validTxnList, 3: i64 invalidationTime,
// 4: bool sourceTablesUpdateDeleteModified; only field 3 still fits here.
struct Materialization {
  1: required bool sourceTablesUpdateDeleteModified
  2: required bool sourceTablesCompacted
  3: optional i64 invalidationTime  // older 3.x only
}

struct TableMeta {
  1: required string dbName
  2: required string tableName
  3: required string tableType
  4: optional string comments
  5: optional string catName
  6: optional string ownerName
  7: optional PrincipalType ownerType
}

struct ExtendedTableInfo {
  1: required string tblName
  2: optional i32 accessType
  3: optional list<string> requiredReadCapabilities
  4: optional list<string> requiredWriteCapabilities
}

// Hive 2.x only (indexes were removed in Hive 3).
struct Index {
  1: string indexName
  2: string indexHandlerClass
  3: string dbName
  4: string origTableName
  5: i32 createTime
  6: i32 lastAccessTime
  7: string indexTableName
  8: StorageDescriptor sd
  9: map<string, string> parameters
  10: bool deferredRebuild
}

struct CreateTableRequest {
  1: required Table table
  2: optional EnvironmentContext envContext
  3: optional list<SQLPrimaryKey> primaryKeys
  4: optional list<SQLForeignKey> foreignKeys
  5: optional list<SQLUniqueConstraint> uniqueConstraints
  6: optional list<SQLNotNullConstraint> notNullConstraints
  7: optional list<SQLDefaultConstraint> defaultConstraints
  8: optional list<SQLCheckConstraint> checkConstraints
  9: optional list<string> processorCapabilities
  10: optional string processorIdentifier
}

struct GetTableRequest {
  1: required string dbName
  2: required string tblName
  3: optional ClientCapabilities capabilities
  4: optional string catName
  6: optional string validWriteIdList
  7: optional bool getColumnStats
  8: optional list<string> processorCapabilities
  9: optional string processorIdentifier
  10: optional string engine = "hive"
  11: optional i64 id = -1
}

struct GetTableResult {
  1: required Table table
  2: optional bool isStatsCompliant
}

struct GetTablesRequest {
  1: required string dbName
  2: optional list<string> tblNames
  3: optional ClientCapabilities capabilities
  4: optional string catName
  5: optional list<string> processorCapabilities
  6: optional string processorIdentifier
  7: optional GetProjectionsSpec projectionSpec
  8: optional string tablesPattern
}

struct GetTablesResult {
  1: required list<Table> tables
}

struct GetTablesExtRequest {
  1: required string catalog
  2: required string database
  3: required string tableNamePattern
  4: required i32 requestedFields
  5: optional i32 limit
  6: optional list<string> processorCapabilities
  7: optional string processorIdentifier
}

struct AlterTableRequest {
  1: optional string catName
  2: required string dbName
  3: required string tableName
  4: required Table table
  5: optional EnvironmentContext environmentContext
  6: optional i64 writeId = -1
  7: optional string validWriteIdList
  8: optional list<string> processorCapabilities
  9: optional string processorIdentifier
  10: optional string expectedParameterKey
  11: optional string expectedParameterValue
}

struct AlterTableResponse {}

struct DropTableRequest {
  1: optional string catalogName
  2: required string dbName
  3: required string tableName
  4: optional bool deleteData
  5: optional EnvironmentContext envContext
  6: optional bool dropPartitions
}

struct TruncateTableRequest {
  1: required string dbName
  2: required string tableName
  3: optional list<string> partNames
  4: optional i64 writeId = -1
  5: optional string validWriteIdList
  6: optional EnvironmentContext environmentContext
}

struct TruncateTableResponse {}

struct GetFieldsRequest {
  1: optional string catName
  2: required string dbName
  3: required string tblName
  4: optional EnvironmentContext envContext
  5: optional string validWriteIdList
  6: optional i64 id = -1
}

struct GetFieldsResponse {
  1: required list<FieldSchema> fields
}

struct GetSchemaRequest {
  1: optional string catName
  2: required string dbName
  3: required string tblName
  4: optional EnvironmentContext envContext
  5: optional string validWriteIdList
  6: optional i64 id = -1
}

struct GetSchemaResponse {
  1: required list<FieldSchema> fields
}

// ==========================================================================
// Partitions
// ==========================================================================

struct Partition {
  1: list<string> values
  2: string dbName
  3: string tableName
  4: i32 createTime
  5: i32 lastAccessTime
  6: StorageDescriptor sd
  7: map<string, string> parameters
  8: optional PrincipalPrivilegeSet privileges
  9: optional string catName
  10: optional i64 writeId = -1
  11: optional bool isStatsCompliant
  12: optional ColumnStatistics colStats
  13: optional FileMetadata fileMetadata
}

struct PartitionWithoutSD {
  1: list<string> values
  2: i32 createTime
  3: i32 lastAccessTime
  4: string relativePath
  5: map<string, string> parameters
  6: optional PrincipalPrivilegeSet privileges
}

struct PartitionSpecWithSharedSD {
  1: list<PartitionWithoutSD> partitions
  2: StorageDescriptor sd
}

struct PartitionListComposingSpec {
  1: list<Partition> partitions
}

struct PartitionSpec {
  1: string dbName
  2: string tableName
  3: string rootPath
  4: optional PartitionSpecWithSharedSD sharedSDPartitionSpec
  5: optional PartitionListComposingSpec partitionList
  6: optional string catName
  7: optional i64 writeId = -1
  8: optional bool isStatsCompliant
}

struct AddPartitionsRequest {
  1: required string dbName
  2: required string tblName
  3: required list<Partition> parts
  4: required bool ifNotExists
  5: optional bool needResult = true
  6: optional string catName
  7: optional string validWriteIdList
  8: optional bool skipColumnSchemaForPartition
  9: optional list<FieldSchema> partitionColSchema
  10: optional EnvironmentContext environmentContext
}

struct AddPartitionsResult {
  1: optional list<Partition> partitions
  2: optional bool isStatsCompliant
  3: optional list<FieldSchema> partitionColSchema
}

struct AppendPartitionsRequest {
  1: optional string catalogName
  2: required string dbName
  3: required string tableName
  4: optional string name
  5: optional list<string> partVals
  6: optional EnvironmentContext environmentContext
}

struct DropPartitionsExpr {
  1: required binary expr
  2: optional i32 partArchiveLevel
}

union RequestPartsSpec {
  1: list<string> names
  2: list<DropPartitionsExpr> exprs
}

struct DropPartitionsRequest {
  1: required string dbName
  2: required string tblName
  3: required RequestPartsSpec parts
  4: optional bool deleteData
  5: optional bool ifExists = true
  6: optional bool ignoreProtection
  7: optional EnvironmentContext environmentContext
  8: optional bool needResult = true
  9: optional string catName
  10: optional bool skipColumnSchemaForPartition
}

struct DropPartitionsResult {
  1: optional list<Partition> partitions
}

struct DropPartitionRequest {
  1: optional string catName
  2: required string dbName
  3: required string tblName
  4: optional string partName
  5: optional list<string> partVals
  6: optional bool deleteData
  7: optional EnvironmentContext environmentContext
}

struct AlterPartitionsRequest {
  1: optional string catName
  2: required string dbName
  3: required string tableName
  4: required list<Partition> partitions
  5: optional EnvironmentContext environmentContext
  6: optional i64 writeId = -1
  7: optional string validWriteIdList
  8: optional bool skipColumnSchemaForPartition
  9: optional list<FieldSchema> partitionColSchema
}

struct AlterPartitionsResponse {}

struct RenamePartitionRequest {
  1: optional string catName
  2: required string dbName
  3: required string tableName
  4: required list<string> partVals
  5: required Partition newPart
  6: optional string validWriteIdList
  7: optional i64 txnId
  8: optional bool clonePart
}

struct RenamePartitionResponse {}

struct GetPartitionRequest {
  1: optional string catName
  2: required string dbName
  3: required string tblName
  4: required list<string> partVals
  5: optional string validWriteIdList
  6: optional i64 id = -1
}

struct GetPartitionResponse {
  1: required Partition partition
}

struct PartitionsRequest {
  1: optional string catName
  2: required string dbName
  3: required string tblName
  4: optional i16 maxParts = -1
  5: optional string validWriteIdList
  6: optional i64 id = -1
  7: optional bool skipColumnSchemaForPartition
  8: optional string includeParamKeyPattern
  9: optional string excludeParamKeyPattern
}

struct PartitionsResponse {
  1: required list<Partition> partitions
}

struct GetPartitionsByNamesRequest {
  1: required string db_name
  2: required string tbl_name
  3: optional list<string> names
  4: optional bool get_col_stats
  5: optional list<string> processorCapabilities
  6: optional string processorIdentifier
  7: optional string engine = "hive"
  8: optional string validWriteIdList
  9: optional bool getFileMetadata
  10: optional i64 id = -1
  11: optional bool skipColumnSchemaForPartition
  12: optional string includeParamKeyPattern
  13: optional string excludeParamKeyPattern
}

struct GetPartitionsByNamesResult {
  1: required list<Partition> partitions
  2: optional ObjectDictionary dictionary
}

struct GetPartitionsByFilterRequest {
  1: optional string catName
  2: string dbName
  3: string tblName
  4: string filter
  5: optional i16 maxParts = -1
  6: optional bool skipColumnSchemaForPartition
  7: optional string includeParamKeyPattern
  8: optional string excludeParamKeyPattern
}

struct PartitionsByExprRequest {
  1: required string dbName
  2: required string tblName
  3: required binary expr
  4: optional string defaultPartitionName
  5: optional i16 maxParts = -1
  6: optional string catName
  7: optional string order
  8: optional string validWriteIdList
  9: optional i64 id = -1
  10: optional bool skipColumnSchemaForPartition
  11: optional string includeParamKeyPattern
  12: optional string excludeParamKeyPattern
}

struct PartitionsByExprResult {
  1: required list<Partition> partitions
  2: required bool hasUnknownPartitions
}

struct PartitionsSpecByExprResult {
  1: required list<PartitionSpec> partitionsSpec
  2: required bool hasUnknownPartitions
}

struct GetPartitionNamesPsRequest {
  1: optional string catName
  2: required string dbName
  3: required string tblName
  4: optional list<string> partValues
  5: optional i16 maxParts = -1
  6: optional string validWriteIdList
  7: optional i64 id = -1
}

struct GetPartitionNamesPsResponse {
  1: required list<string> names
}

struct GetPartitionsPsWithAuthRequest {
  1: optional string catName
  2: required string dbName
  3: required string tblName
  4: optional list<string> partVals
  5: optional i16 maxParts = -1
  6: optional string userName
  7: optional list<string> groupNames
  8: optional string validWriteIdList
  9: optional i64 id = -1
  10: optional bool skipColumnSchemaForPartition
  11: optional string includeParamKeyPattern
  12: optional string excludeParamKeyPattern
  13: optional list<string> partNames
}

struct GetPartitionsPsWithAuthResponse {
  1: required list<Partition> partitions
}

struct PartitionValuesRequest {
  1: required string dbName
  2: required string tblName
  3: required list<FieldSchema> partitionKeys
  4: optional bool applyDistinct = true
  5: optional string filter
  6: optional list<FieldSchema> partitionOrder
  7: optional bool ascending = true
  8: optional i64 maxParts = -1
  9: optional string catName
  10: optional string validWriteIdList
}

struct PartitionValuesRow {
  1: required list<string> row
}

struct PartitionValuesResponse {
  1: required list<PartitionValuesRow> partitionValues
}

struct GetPartitionsFilterSpec {
  7: optional PartitionFilterMode filterMode
  8: optional list<string> filters
}

struct GetPartitionsRequest {
  1: optional string catName
  2: string dbName
  3: string tblName
  4: optional bool withAuth
  5: optional string user
  6: optional list<string> groupNames
  7: GetProjectionsSpec projectionSpec
  8: GetPartitionsFilterSpec filterSpec
  9: optional list<string> processorCapabilities
  10: optional string processorIdentifier
  11: optional string validWriteIdList
}

struct GetPartitionsResponse {
  1: list<PartitionSpec> partitionSpec
}

// ==========================================================================
// Constraints
// ==========================================================================

struct SQLPrimaryKey {
  1: string table_db
  2: string table_name
  3: string column_name
  4: i32 key_seq
  5: string pk_name
  6: bool enable_cstr
  7: bool validate_cstr
  8: bool rely_cstr
  9: optional string catName
}

struct SQLForeignKey {
  1: string pktable_db
  2: string pktable_name
  3: string pkcolumn_name
  4: string fktable_db
  5: string fktable_name
  6: string fkcolumn_name
  7: i32 key_seq
  8: i32 update_rule
  9: i32 delete_rule
  10: string fk_name
  11: string pk_name
  12: bool enable_cstr
  13: bool validate_cstr
  14: bool rely_cstr
  15: optional string catName
}

struct SQLUniqueConstraint {
  1: string catName
  2: string table_db
  3: string table_name
  4: string column_name
  5: i32 key_seq
  6: string uk_name
  7: bool enable_cstr
  8: bool validate_cstr
  9: bool rely_cstr
}

struct SQLNotNullConstraint {
  1: string catName
  2: string table_db
  3: string table_name
  4: string column_name
  5: string nn_name
  6: bool enable_cstr
  7: bool validate_cstr
  8: bool rely_cstr
}

struct SQLDefaultConstraint {
  1: string catName
  2: string table_db
  3: string table_name
  4: string column_name
  5: string default_value
  6: string dc_name
  7: bool enable_cstr
  8: bool validate_cstr
  9: bool rely_cstr
}

struct SQLCheckConstraint {
  1: string catName
  2: string table_db
  3: string table_name
  4: string column_name
  5: string check_expression
  6: string dc_name
  7: bool enable_cstr
  8: bool validate_cstr
  9: bool rely_cstr
}

struct SQLAllTableConstraints {
  1: optional list<SQLPrimaryKey> primaryKeys
  2: optional list<SQLForeignKey> foreignKeys
  3: optional list<SQLUniqueConstraint> uniqueConstraints
  4: optional list<SQLNotNullConstraint> notNullConstraints
  5: optional list<SQLDefaultConstraint> defaultConstraints
  6: optional list<SQLCheckConstraint> checkConstraints
}

struct PrimaryKeysRequest {
  1: required string db_name
  2: required string tbl_name
  3: optional string catName
  4: optional string validWriteIdList
  5: optional i64 tableId = -1
}

struct PrimaryKeysResponse {
  1: required list<SQLPrimaryKey> primaryKeys
}

struct ForeignKeysRequest {
  1: string parent_db_name
  2: string parent_tbl_name
  3: string foreign_db_name
  4: string foreign_tbl_name
  5: optional string catName
  6: optional string validWriteIdList
  7: optional i64 tableId = -1
}

struct ForeignKeysResponse {
  1: required list<SQLForeignKey> foreignKeys
}

struct UniqueConstraintsRequest {
  1: required string catName
  2: required string db_name
  3: required string tbl_name
  4: optional string validWriteIdList
  5: optional i64 tableId = -1
}

struct UniqueConstraintsResponse {
  1: required list<SQLUniqueConstraint> uniqueConstraints
}

struct NotNullConstraintsRequest {
  1: required string catName
  2: required string db_name
  3: required string tbl_name
  4: optional string validWriteIdList
  5: optional i64 tableId = -1
}

struct NotNullConstraintsResponse {
  1: required list<SQLNotNullConstraint> notNullConstraints
}

struct DefaultConstraintsRequest {
  1: required string catName
  2: required string db_name
  3: required string tbl_name
  4: optional string validWriteIdList
  5: optional i64 tableId = -1
}

struct DefaultConstraintsResponse {
  1: required list<SQLDefaultConstraint> defaultConstraints
}

struct CheckConstraintsRequest {
  1: required string catName
  2: required string db_name
  3: required string tbl_name
  4: optional string validWriteIdList
  5: optional i64 tableId = -1
}

struct CheckConstraintsResponse {
  1: required list<SQLCheckConstraint> checkConstraints
}

struct AllTableConstraintsRequest {
  1: required string dbName
  2: required string tblName
  3: required string catName
  4: optional string validWriteIdList
  5: optional i64 tableId = -1
}

struct AllTableConstraintsResponse {
  1: required SQLAllTableConstraints allTableConstraints
}

struct AddPrimaryKeyRequest {
  1: required list<SQLPrimaryKey> primaryKeyCols
}

struct AddForeignKeyRequest {
  1: required list<SQLForeignKey> foreignKeyCols
}

struct AddUniqueConstraintRequest {
  1: required list<SQLUniqueConstraint> uniqueConstraintCols
}

struct AddNotNullConstraintRequest {
  1: required list<SQLNotNullConstraint> notNullConstraintCols
}

struct AddDefaultConstraintRequest {
  1: required list<SQLDefaultConstraint> defaultConstraintCols
}

struct AddCheckConstraintRequest {
  1: required list<SQLCheckConstraint> checkConstraintCols
}

struct DropConstraintRequest {
  1: required string dbname
  2: required string tablename
  3: required string constraintname
  4: optional string catName
}

// ==========================================================================
// Column statistics
// ==========================================================================

struct BooleanColumnStatsData {
  1: required i64 numTrues
  2: required i64 numFalses
  3: required i64 numNulls
  4: optional binary bitVectors
}

struct DoubleColumnStatsData {
  1: optional double lowValue
  2: optional double highValue
  3: required i64 numNulls
  4: required i64 numDVs
  5: optional binary bitVectors
  6: optional binary histogram
}

struct LongColumnStatsData {
  1: optional i64 lowValue
  2: optional i64 highValue
  3: required i64 numNulls
  4: required i64 numDVs
  5: optional binary bitVectors
  6: optional binary histogram
}

struct StringColumnStatsData {
  1: required i64 maxColLen
  2: required double avgColLen
  3: required i64 numNulls
  4: required i64 numDVs
  5: optional binary bitVectors
}

struct BinaryColumnStatsData {
  1: required i64 maxColLen
  2: required double avgColLen
  3: required i64 numNulls
  4: optional binary bitVectors
}

struct Decimal {
  1: required binary unscaled
  3: required i16 scale
}

struct DecimalColumnStatsData {
  1: optional Decimal lowValue
  2: optional Decimal highValue
  3: required i64 numNulls
  4: required i64 numDVs
  5: optional binary bitVectors
  6: optional binary histogram
}

struct Date {
  1: required i64 daysSinceEpoch
}

struct DateColumnStatsData {
  1: optional Date lowValue
  2: optional Date highValue
  3: required i64 numNulls
  4: required i64 numDVs
  5: optional binary bitVectors
  6: optional binary histogram
}

struct Timestamp {
  1: required i64 secondsSinceEpoch
}

struct TimestampColumnStatsData {
  1: optional Timestamp lowValue
  2: optional Timestamp highValue
  3: required i64 numNulls
  4: required i64 numDVs
  5: optional binary bitVectors
  6: optional binary histogram
}

union ColumnStatisticsData {
  1: BooleanColumnStatsData booleanStats
  2: LongColumnStatsData longStats
  3: DoubleColumnStatsData doubleStats
  4: StringColumnStatsData stringStats
  5: BinaryColumnStatsData binaryStats
  6: DecimalColumnStatsData decimalStats
  7: DateColumnStatsData dateStats
  8: TimestampColumnStatsData timestampStats
}

struct ColumnStatisticsObj {
  1: required string colName
  2: required string colType
  3: required ColumnStatisticsData statsData
}

struct ColumnStatisticsDesc {
  1: required bool isTblLevel
  2: required string dbName
  3: required string tableName
  4: optional string partName
  5: optional i64 lastAnalyzed
  6: optional string catName
}

struct ColumnStatistics {
  1: required ColumnStatisticsDesc statsDesc
  2: required list<ColumnStatisticsObj> statsObj
  3: optional bool isStatsCompliant
  4: optional string engine = "hive"
}

struct AggrStats {
  1: required list<ColumnStatisticsObj> colStats
  2: required i64 partsFound
  3: optional bool isStatsCompliant
}

struct SetPartitionsStatsRequest {
  1: required list<ColumnStatistics> colStats
  2: optional bool needMerge
  3: optional i64 writeId = -1
  4: optional string validWriteIdList
  5: optional string engine = "hive"
}

struct SetPartitionsStatsResponse {
  1: required bool result
}

struct TableStatsRequest {
  1: required string dbName
  2: required string tblName
  3: required list<string> colNames
  4: optional string catName
  5: optional string validWriteIdList
  6: optional string engine = "hive"
  7: optional i64 id = -1
}

struct TableStatsResult {
  1: required list<ColumnStatisticsObj> tableStats
  2: optional bool isStatsCompliant
}

struct PartitionsStatsRequest {
  1: required string dbName
  2: required string tblName
  3: required list<string> colNames
  4: required list<string> partNames
  5: optional string catName
  6: optional string validWriteIdList
  7: optional string engine = "hive"
}

struct PartitionsStatsResult {
  1: required map<string, list<ColumnStatisticsObj>> partStats
  2: optional bool isStatsCompliant
}

struct UpdateTransactionalStatsRequest {
  1: required i64 tableId
  2: required i64 insertCount
  3: required i64 updatedCount
  4: required i64 deletedCount
}

// ==========================================================================
// Functions
// ==========================================================================

struct ResourceUri {
  1: ResourceType resourceType
  2: string uri
}

struct Function {
  1: string functionName
  2: string dbName
  3: string className
  4: string ownerName
  5: PrincipalType ownerType
  6: i32 createTime
  7: FunctionType functionType
  8: list<ResourceUri> resourceUris
  9: optional string catName
}

struct GetAllFunctionsResponse {
  1: optional list<Function> functions
}

// ==========================================================================
// Privileges and roles
// ==========================================================================

struct HiveObjectRef {
  1: HiveObjectType objectType
  2: string dbName
  3: string objectName
  4: list<string> partValues
  5: string columnName
  6: optional string catName
}

struct PrivilegeGrantInfo {
  1: string privilege
  2: i32 createTime
  3: string grantor
  4: PrincipalType grantorType
  5: bool grantOption
}

struct HiveObjectPrivilege {
  1: HiveObjectRef hiveObject
  2: string principalName
  3: PrincipalType principalType
  4: PrivilegeGrantInfo grantInfo
  5: string authorizer
}

struct PrivilegeBag {
  1: list<HiveObjectPrivilege> privileges
}

struct PrincipalPrivilegeSet {
  1: map<string, list<PrivilegeGrantInfo>> userPrivileges
  2: map<string, list<PrivilegeGrantInfo>> groupPrivileges
  3: map<string, list<PrivilegeGrantInfo>> rolePrivileges
}

struct GrantRevokePrivilegeRequest {
  1: GrantRevokeType requestType
  2: PrivilegeBag privileges
  3: optional bool revokeGrantOption
}

struct GrantRevokePrivilegeResponse {
  1: optional bool success
}

struct Role {
  1: string roleName
  2: i32 createTime
  3: string ownerName
}

struct RolePrincipalGrant {
  1: string roleName
  2: string principalName
  3: PrincipalType principalType
  4: bool grantOption
  5: i32 grantTime
  6: string grantorName
  7: PrincipalType grantorPrincipalType
}

struct GetRoleGrantsForPrincipalRequest {
  1: required string principal_name
  2: required PrincipalType principal_type
}

struct GetRoleGrantsForPrincipalResponse {
  1: required list<RolePrincipalGrant> principalGrants
}

struct GetPrincipalsInRoleRequest {
  1: required string roleName
}

struct GetPrincipalsInRoleResponse {
  1: required list<RolePrincipalGrant> principalGrants
}

struct GrantRevokeRoleRequest {
  1: GrantRevokeType requestType
  2: string roleName
  3: string principalName
  4: PrincipalType principalType
  5: optional string grantor
  6: optional PrincipalType grantorType
  7: optional bool grantOption
}

struct GrantRevokeRoleResponse {
  1: optional bool success
}

// ==========================================================================
// Transactions, write ids and locks
// ==========================================================================

struct TxnInfo {
  1: required i64 id
  2: required TxnState state
  3: required string user
  4: required string hostname
  5: optional string agentInfo = "Unknown"
  6: optional i32 heartbeatCount = 0
  7: optional string metaInfo
  8: optional i64 startedTime
  9: optional i64 lastHeartbeatTime
}

struct GetOpenTxnsRequest {
  1: optional list<TxnType> excludeTxnTypes
}

struct GetOpenTxnsInfoResponse {
  1: required i64 txn_high_water_mark
  2: required list<TxnInfo> open_txns
}

struct GetOpenTxnsResponse {
  1: required i64 txn_high_water_mark
  2: required list<i64> open_txns  // set<i64> before Hive 3
  3: optional i64 min_open_txn
  4: required binary abortedBits
}

struct OpenTxnRequest {
  1: required i32 num_txns
  2: required string user
  3: required string hostname
  4: optional string agentInfo = "Unknown"
  5: optional string replPolicy
  6: optional list<i64> replSrcTxnIds
  7: optional TxnType txn_type = TxnType.DEFAULT
}

struct OpenTxnsResponse {
  1: required list<i64> txn_ids
}

struct AbortTxnRequest {
  1: required i64 txnid
  2: optional string replPolicy
  3: optional TxnType txn_type
  4: optional i64 errorCode
}

struct AbortTxnsRequest {
  1: required list<i64> txn_ids
  2: optional i64 errorCode
}

struct CommitTxnKeyValue {
  1: required i64 tableId
  2: required string key
  3: required string value
}

struct WriteEventInfo {
  1: required i64 writeId
  2: required string database
  3: required string table
  4: required string files
  5: optional string partition
  6: optional string tableObj
  7: optional string partitionObj
}

struct ReplLastIdInfo {
  1: required string database
  2: required i64 lastReplId
  3: optional string table
  4: optional string catalog
  5: optional list<string> partitionList
}

struct CommitTxnRequest {
  1: required i64 txnid
  2: optional string replPolicy
  3: optional list<WriteEventInfo> writeEventInfos
  4: optional ReplLastIdInfo replLastIdInfo
  5: optional CommitTxnKeyValue keyValue
  6: optional bool exclWriteEnabled = true
  7: optional TxnType txn_type
}

struct GetAllWriteEventInfoRequest {
  1: required i64 txnId
  2: optional string dbName
  3: optional string tableName
}

struct ReplTblWriteIdStateRequest {
  1: required string validWriteIdlist
  2: required string user
  3: required string hostName
  4: required string dbName
  5: required string tableName
  6: optional list<string> partNames
}

struct GetValidWriteIdsRequest {
  1: required list<string> fullTableNames
  2: optional string validTxnList
  3: optional i64 writeId
}

struct TableValidWriteIds {
  1: required string fullTableName
  2: required i64 writeIdHighWaterMark
  3: required list<i64> invalidWriteIds
  4: optional i64 minOpenWriteId
  5: required binary abortedBits
}

struct GetValidWriteIdsResponse {
  1: required list<TableValidWriteIds> tblValidWriteIds
}

struct TxnToWriteId {
  1: required i64 txnId
  2: required i64 writeId
}

struct AllocateTableWriteIdsRequest {
  1: required string dbName
  2: required string tableName
  3: optional list<i64> txnIds
  4: optional string replPolicy
  5: optional list<TxnToWriteId> srcTxnToWriteIdList
  6: optional bool reallocate = false
}

struct AllocateTableWriteIdsResponse {
  1: required list<TxnToWriteId> txnToWriteIds
}

struct MaxAllocatedTableWriteIdRequest {
  1: required string dbName
  2: required string tableName
}

struct MaxAllocatedTableWriteIdResponse {
  1: required i64 maxWriteId
}

struct SeedTableWriteIdsRequest {
  1: required string dbName
  2: required string tableName
  3: required i64 seedWriteId
}

struct SeedTxnIdRequest {
  1: required i64 seedTxnId
}

// Hive 2.x numbered these without writeid (dbname was 2).
struct AddDynamicPartitions {
  1: required i64 txnid
  2: required i64 writeid
  3: required string dbname
  4: required string tablename
  5: required list<string> partitionnames
  6: optional DataOperationType operationType = DataOperationType.UNSET
}

struct BasicTxnInfo {
  1: required bool isnull
  2: optional i64 time
  3: optional i64 txnid
  4: optional string dbname
  5: optional string tablename
  6: optional string partitionname
}

struct LockComponent {
  1: required LockType type
  2: required LockLevel level
  3: required string dbname
  4: optional string tablename
  5: optional string partitionname
  6: optional DataOperationType operationType = DataOperationType.UNSET
  7: optional bool isTransactional = false  // named isAcid in Hive 2.x
  8: optional bool isDynamicPartitionWrite = false
}

struct LockRequest {
  1: required list<LockComponent> component
  2: optional i64 txnid
  3: required string user
  4: required string hostname
  5: optional string agentInfo = "Unknown"
  6: optional bool zeroWaitReadEnabled = false
  7: optional bool exclusiveCTAS = false
  8: optional bool locklessReadsEnabled = false
}

struct LockResponse {
  1: required i64 lockid
  2: required LockState state
  3: optional string errorMessage
}

struct CheckLockRequest {
  1: required i64 lockid
  2: optional i64 txnid
  3: optional i64 elapsed_ms
}

struct UnlockRequest {
  1: required i64 lockid
}

struct ShowLocksRequest {
  1: optional string dbname
  2: optional string tablename
  3: optional string partname
  4: optional bool isExtended = false
  5: optional i64 txnid
}

struct ShowLocksResponseElement {
  1: required i64 lockid
  2: required string dbname
  3: optional string tablename
  4: optional string partname
  5: required LockState state
  6: required LockType type
  7: optional i64 txnid
  8: required i64 lastheartbeat
  9: optional i64 acquiredat
  10: required string user
  11: required string hostname
  12: optional i32 heartbeatCount = 0
  13: optional string agentInfo
  14: optional i64 blockedByExtId
  15: optional i64 blockedByIntId
  16: optional i64 lockIdInternal
}

struct ShowLocksResponse {
  1: list<ShowLocksResponseElement> locks
}

struct HeartbeatRequest {
  1: optional i64 lockid
  2: optional i64 txnid
}

struct HeartbeatTxnRangeRequest {
  1: required i64 min
  2: required i64 max
}

struct HeartbeatTxnRangeResponse {
  1: required set<i64> aborted
  2: required set<i64> nosuch
}

// ==========================================================================
// Compaction
// ==========================================================================

struct CompactionRequest {
  1: required string dbname
  2: required string tablename
  3: optional string partitionname
  4: required CompactionType type
  5: optional string runas
  6: optional map<string, string> properties
  7: optional string initiatorId
  8: optional string initiatorVersion
  9: optional string poolName
  10: optional i32 numberOfBuckets
  11: optional string orderByClause
}

struct CompactionResponse {
  1: required i64 id
  2: required string state
  3: required bool accepted
  4: optional string errormessage
}

struct CompactionInfoStruct {
  1: required i64 id
  2: required string dbname
  3: required string tablename
  4: optional string partitionname
  5: required CompactionType type
  6: optional string runas
  7: optional string properties
  8: optional bool toomanyaborts
  9: optional string state
  10: optional string workerId
  11: optional i64 start
  12: optional i64 highestWriteId
  13: optional string errorMessage
  14: optional bool hasoldabort
  15: optional i64 enqueueTime
  16: optional i64 retryRetention
  17: optional string poolname
  18: optional i32 numberOfBuckets
  19: optional string orderByClause
}

struct OptionalCompactionInfoStruct {
  1: optional CompactionInfoStruct ci
}

struct FindNextCompactRequest {
  1: optional string workerId
  2: optional string workerVersion
  3: optional string poolName
}

struct CompactionMetricsDataStruct {
  1: required string dbname
  2: required string tblname
  3: optional string partitionname
  4: required CompactionMetricsMetricType type
  5: required i32 metricvalue
  6: required i32 version
  7: required i32 threshold
}

struct CompactionMetricsDataResponse {
  1: optional CompactionMetricsDataStruct data
}

struct CompactionMetricsDataRequest {
  1: required string dbName
  2: required string tblName
  3: optional string partitionName
  4: required CompactionMetricsMetricType type
}

struct ShowCompactRequest {
  1: optional i64 id
  2: optional string poolName
  3: optional string dbName
  4: optional string tbName
  5: optional string partName
  6: optional CompactionType type
  7: optional string state
  8: optional i64 limit
  9: optional string order
}

struct ShowCompactResponseElement {
  1: required string dbname
  2: required string tablename
  3: optional string partitionname
  4: required CompactionType type
  5: required string state
  6: optional string workerid
  7: optional i64 start
  8: optional string runAs
  9: optional i64 hightestTxnId
  10: optional string metaInfo
  11: optional i64 endTime
  12: optional string hadoopJobId = "None"
  13: optional i64 id
  14: optional string errorMessage
  15: optional i64 enqueueTime
  16: optional string workerVersion
  17: optional string initiatorId
  18: optional string initiatorVersion
  19: optional i64 cleanerStart
  20: optional string poolName
  21: optional i64 nextTxnId
  22: optional i64 txnId
  23: optional i64 commitTime
  24: optional i64 hightestWriteId
}

struct ShowCompactResponse {
  1: required list<ShowCompactResponseElement> compacts
}

struct AbortCompactionRequest {
  1: required list<i64> compactionIds
  2: optional string type
  3: optional string poolName
}

struct AbortCompactionResponseElement {
  1: required i64 compactionId
  2: optional string status
  3: optional string message
}

struct AbortCompactResponse {
  1: required map<i64, AbortCompactionResponseElement> abortedcompacts
}

struct GetLatestCommittedCompactionInfoRequest {
  1: required string dbname
  2: required string tablename
  3: optional list<string> partitionnames
  4: optional i64 lastCompactionId
}

struct GetLatestCommittedCompactionInfoResponse {
  1: required list<CompactionInfoStruct> compactions
}

// ==========================================================================
// Notification log and listener events
// ==========================================================================

struct NotificationEventRequest {
  1: required i64 lastEvent
  2: optional i32 maxEvents
  3: optional list<string> eventTypeSkipList
  4: optional string catName
  5: optional string dbName
  6: optional list<string> tableNames
}

struct NotificationEvent {
  1: required i64 eventId
  2: required i32 eventTime
  3: required string eventType
  4: optional string dbName
  5: optional string tableName
  6: required string message
  7: optional string messageFormat
  8: optional string catName
}

struct NotificationEventResponse {
  1: required list<NotificationEvent> events
}

struct CurrentNotificationEventId {
  1: required i64 eventId
}

struct NotificationEventsCountRequest {
  1: required i64 fromEventId
  2: required string dbName
  3: optional string catName
  4: optional i64 toEventId
  5: optional i64 limit
  6: optional list<string> tableNames
}

struct NotificationEventsCountResponse {
  1: required i64 eventsCount
}

// Hive 2.x started at filesAdded = 1.
struct InsertEventRequestData {
  1: optional bool replace
  2: required list<string> filesAdded
  3: optional list<string> filesAddedChecksum
  4: optional list<string> subDirectoryList
  5: optional list<string> partitionVal
}

union FireEventRequestData {
  1: InsertEventRequestData insertData
  2: list<InsertEventRequestData> insertDatas
  3: bool refreshEvent
}

struct FireEventRequest {
  1: required bool successful
  2: required FireEventRequestData data
  3: optional string dbName
  4: optional string tableName
  5: optional list<string> partitionVals
  6: optional string catName
  7: optional map<string, string> tblParams
}

struct FireEventResponse {
  1: list<i64> eventIds
}

struct WriteNotificationLogRequest {
  1: required i64 txnId
  2: required i64 writeId
  3: required string db
  4: required string table
  5: required InsertEventRequestData fileInfo
  6: optional list<string> partitionVals
}

struct WriteNotificationLogResponse {}

struct WriteNotificationLogBatchRequest {
  1: required string catalog
  2: required string db
  3: required string table
  4: required list<WriteNotificationLogRequest> requestList
}

struct WriteNotificationLogBatchResponse {}

// ==========================================================================
// Replication and change management
// ==========================================================================

struct CmRecycleRequest {
  1: required string dataPath
  2: required bool purge
}

struct CmRecycleResponse {}

struct ReplicationMetrics {
  1: required i64 scheduledExecutionId
  2: required string policy
  3: required i64 dumpExecutionId
  4: optional string metadata
  5: optional string progress
  6: optional string messageFormat
}

struct ReplicationMetricList {
  1: required list<ReplicationMetrics> replicationMetricList
}

struct GetReplicationMetricsRequest {
  1: optional i64 scheduledExecutionId
  2: optional string policy
  3: optional i64 dumpExecutionId
}

// ==========================================================================
// File metadata cache
// ==========================================================================

struct MetadataPpdResult {
  1: optional binary metadata
  2: optional binary includeBitset
}

struct GetFileMetadataByExprRequest {
  1: required list<i64> fileIds
  2: required binary expr
  3: optional bool doGetFooters
  4: optional FileMetadataExprType type
}

struct GetFileMetadataByExprResult {
  1: required map<i64, MetadataPpdResult> metadata
  2: required bool isSupported
}

struct GetFileMetadataRequest {
  1: required list<i64> fileIds
}

struct GetFileMetadataResult {
  1: required map<i64, binary> metadata
  2: required bool isSupported
}

struct PutFileMetadataRequest {
  1: required list<i64> fileIds
  2: required list<binary> metadata
  3: optional FileMetadataExprType type
}

struct PutFileMetadataResult {}

struct ClearFileMetadataRequest {
  1: required list<i64> fileIds
}

struct ClearFileMetadataResult {}

struct CacheFileMetadataRequest {
  1: required string dbName
  2: required string tblName
  3: optional string partName
  4: optional bool isAllParts
}

struct CacheFileMetadataResult {
  1: required bool isSupported
}

// ==========================================================================
// Workload management
// ==========================================================================

struct WMResourcePlan {
  1: required string name
  2: optional WMResourcePlanStatus status
  3: optional i32 queryParallelism
  4: optional string defaultPoolPath
  5: optional string ns
}

struct WMNullableResourcePlan {
  1: optional string name
  2: optional WMResourcePlanStatus status
  4: optional i32 queryParallelism
  5: optional bool isSetQueryParallelism
  6: optional string defaultPoolPath
  7: optional bool isSetDefaultPoolPath
  8: optional string ns
}

struct WMPool {
  1: required string resourcePlanName
  2: required string poolPath
  3: optional double allocFraction
  4: optional i32 queryParallelism
  5: optional string schedulingPolicy
  6: optional string ns
}

struct WMNullablePool {
  1: required string resourcePlanName
  2: required string poolPath
  3: optional double allocFraction
  4: optional i32 queryParallelism
  5: optional string schedulingPolicy
  6: optional bool isSetSchedulingPolicy
  7: optional string ns
}

struct WMTrigger {
  1: required string resourcePlanName
  2: required string triggerName
  3: optional string triggerExpression
  4: optional string actionExpression
  5: optional bool isInUnmanaged
  6: optional string ns
}

struct WMMapping {
  1: required string resourcePlanName
  2: required string entityType
  3: required string entityName
  4: optional string poolPath
  5: optional i32 ordering
  6: optional string ns
}

struct WMPoolTrigger {
  1: required string pool
  2: required string trigger
  3: optional string ns
}

struct WMFullResourcePlan {
  1: required WMResourcePlan plan
  2: required list<WMPool> pools
  3: optional list<WMMapping> mappings
  4: optional list<WMTrigger> triggers
  5: optional list<WMPoolTrigger> poolTriggers
}

struct WMCreateResourcePlanRequest {
  1: optional WMResourcePlan resourcePlan
  2: optional string copyFrom
}

struct WMCreateResourcePlanResponse {}

struct WMGetActiveResourcePlanRequest {
  1: optional string ns
}

struct WMGetActiveResourcePlanResponse {
  1: optional WMFullResourcePlan resourcePlan
}

struct WMGetResourcePlanRequest {
  1: optional string resourcePlanName
  2: optional string ns
}

struct WMGetResourcePlanResponse {
  1: optional WMFullResourcePlan resourcePlan
}

struct WMGetAllResourcePlanRequest {
  1: optional string ns
}

struct WMGetAllResourcePlanResponse {
  1: optional list<WMResourcePlan> resourcePlans
}

struct WMAlterResourcePlanRequest {
  1: optional string resourcePlanName
  2: optional WMNullableResourcePlan resourcePlan
  3: optional bool isEnableAndActivate
  4: optional bool isForceDeactivate
  5: optional bool isReplace
  6: optional string ns
}

struct WMAlterResourcePlanResponse {
  1: optional WMFullResourcePlan fullResourcePlan
}

struct WMValidateResourcePlanRequest {
  1: optional string resourcePlanName
  2: optional string ns
}

struct WMValidateResourcePlanResponse {
  1: optional list<string> errors
  2: optional list<string> warnings
}

struct WMDropResourcePlanRequest {
  1: optional string resourcePlanName
  2: optional string ns
}

struct WMDropResourcePlanResponse {}

struct WMCreateTriggerRequest {
  1: optional WMTrigger trigger
}

struct WMCreateTriggerResponse {}

struct WMAlterTriggerRequest {
  1: optional WMTrigger trigger
}

struct WMAlterTriggerResponse {}

struct WMDropTriggerRequest {
  1: optional string resourcePlanName
  2: optional string triggerName
  3: optional string ns
}

struct WMDropTriggerResponse {}

struct WMGetTriggersForResourePlanRequest {
  1: optional string resourcePlanName
  2: optional string ns
}

struct WMGetTriggersForResourePlanResponse {
  1: optional list<WMTrigger> triggers
}

struct WMCreatePoolRequest {
  1: optional WMPool pool
}

struct WMCreatePoolResponse {}

struct WMAlterPoolRequest {
  1: optional WMNullablePool pool
  2: optional string poolPath
}

struct WMAlterPoolResponse {}

struct WMDropPoolRequest {
  1: optional string resourcePlanName
  2: optional string poolPath
  3: optional string ns
}

struct WMDropPoolResponse {}

struct WMCreateOrUpdateMappingRequest {
  1: optional WMMapping mapping
  2: optional bool update
}

struct WMCreateOrUpdateMappingResponse {}

struct WMDropMappingRequest {
  1: optional WMMapping mapping
}

struct WMDropMappingResponse {}

struct WMCreateOrDropTriggerToPoolMappingRequest {
  1: optional string resourcePlanName
  2: optional string triggerName
  3: optional string poolPath
  4: optional bool drop
  5: optional string ns
}

struct WMCreateOrDropTriggerToPoolMappingResponse {}

// ==========================================================================
// Schema registry
// ==========================================================================

struct ISchemaName {
  1: string catName
  2: string dbName
  3: string schemaName
}

struct ISchema {
  1: SchemaType schemaType
  2: string name
  3: string catName
  4: string dbName
  5: SchemaCompatibility compatibility
  6: SchemaValidation validationLevel
  7: bool canEvolve
  8: optional string schemaGroup
  9: optional string description
}

struct AlterISchemaRequest {
  1: ISchemaName name
  3: ISchema newSchema
}

struct SchemaVersionDescriptor {
  1: ISchemaName schema
  2: i32 version
}

struct SchemaVersion {
  1: ISchemaName schema
  2: i32 version
  3: i64 createdAt
  4: list<FieldSchema> cols
  5: optional SchemaVersionState state
  6: optional string description
  7: optional string schemaText
  8: optional string fingerprint
  9: optional string name
  10: optional SerDeInfo serDe
}

struct FindSchemasByColsRqst {
  1: optional string colName
  2: optional string colNamespace
  3: optional string type
}

struct FindSchemasByColsResp {
  1: list<SchemaVersionDescriptor> schemaVersions
}

struct MapSchemaVersionToSerdeRequest {
  1: SchemaVersionDescriptor schemaVersion
  2: string serdeName
}

struct SetSchemaVersionStateRequest {
  1: SchemaVersionDescriptor schemaVersion
  2: SchemaVersionState state
}

struct GetSerdeRequest {
  1: string serdeName
}

// ==========================================================================
// Runtime statistics
// ==========================================================================

struct RuntimeStat {
  1: optional i32 createTime
  2: required i32 weight
  3: required binary payload
}

struct GetRuntimeStatsRequest {
  1: required i32 maxWeight
  2: required i32 maxCreateTime
}

// ==========================================================================
// Scheduled queries
// ==========================================================================

struct ScheduledQueryKey {
  1: required string scheduleName
  2: required string clusterNamespace
}

struct ScheduledQuery {
  1: required ScheduledQueryKey scheduleKey
  2: optional bool enabled
  4: optional string schedule
  5: optional string user
  6: optional string query
  7: optional i32 nextExecution
}

struct ScheduledQueryPollRequest {
  1: required string clusterNamespace
}

struct ScheduledQueryPollResponse {
  1: optional ScheduledQueryKey scheduleKey
  2: optional i64 executionId
  3: optional string query
  4: optional string user
}

struct ScheduledQueryMaintenanceRequest {
  1: required ScheduledQueryMaintenanceRequestType type
  2: required ScheduledQuery scheduledQuery
}

struct ScheduledQueryProgressInfo {
  1: required i64 scheduledExecutionId
  2: required QueryState state
  3: required string executorQueryId
  4: optional string errorMessage
}

// ==========================================================================
// Stored procedures and packages
// ==========================================================================

struct StoredProcedure {
  1: string name
  2: string dbName
  3: string catName
  4: string ownerName
  5: string source
}

struct StoredProcedureRequest {
  1: required string catName
  2: required string dbName
  3: required string procName
}

struct ListStoredProcedureRequest {
  1: required string catName
  2: optional string dbName
}

struct Package {
  1: string catName
  2: string dbName
  3: string packageName
  4: string ownerName
  5: string header
  6: string body
}

struct AddPackageRequest {
  1: string catName
  2: string dbName
  3: string packageName
  4: string ownerName
  5: string header
  6: string body
}

struct GetPackageRequest {
  1: required string catName
  2: required string dbName
  3: required string packageName
}

struct DropPackageRequest {
  1: required string catName
  2: required string dbName
  3: required string packageName
}

struct ListPackageRequest {
  1: required string catName
  2: optional string dbName
}

// ==========================================================================
// Metastore properties
// ==========================================================================

struct PropertySetRequest {
  1: required string nameSpace
  2: map<string, string> propertyMap
}

struct PropertyGetRequest {
  1: required string nameSpace
  2: string mapPrefix
  3: optional string mapPredicate
  4: optional list<string> mapSelection
}

struct PropertyGetResponse {
  1: map<string, map<string, string>> properties
}

// ==========================================================================
// Service
// ==========================================================================

service ThriftHiveMetastore extends fb303.FacebookService {
  // -- Server configuration and housekeeping
  string getMetaConf(1: string key)
      throws (1: MetaException o1)
  void setMetaConf(1: string key, 2: string value)
      throws (1: MetaException o1)
  PropertyGetResponse get_properties(1: PropertyGetRequest req)
      throws (1: MetaException e1, 2: NoSuchObjectException e2)
  bool set_properties(1: PropertySetRequest req)
      throws (1: MetaException e1, 2: NoSuchObjectException e2)
  string get_config_value(1: string name, 2: string defaultValue)
      throws (1: ConfigValSecurityException o1)
  list<string> set_ugi(1: string user_name, 2: list<string> group_names)
      throws (1: MetaException o1)
  void flushCache()
  string get_metastore_db_uuid()
      throws (1: MetaException o1)

  // -- Catalogs
  void create_catalog(1: CreateCatalogRequest catalog)
      throws (1: AlreadyExistsException o1, 2: InvalidObjectException o2, 3: MetaException o3)
  void alter_catalog(1: AlterCatalogRequest rqst)
      throws (1: NoSuchObjectException o1, 2: InvalidOperationException o2, 3: MetaException o3)
  GetCatalogResponse get_catalog(1: GetCatalogRequest catName)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  GetCatalogsResponse get_catalogs()
      throws (1: MetaException o1)
  void drop_catalog(1: DropCatalogRequest catName)
      throws (1: NoSuchObjectException o1, 2: InvalidOperationException o2, 3: MetaException o3)

  // -- Databases
  void create_database(1: Database database)
      throws (1: AlreadyExistsException o1, 2: InvalidObjectException o2, 3: MetaException o3)
  void create_database_req(1: CreateDatabaseRequest createDatabaseRequest)
      throws (1: AlreadyExistsException o1, 2: InvalidObjectException o2, 3: MetaException o3)
  Database get_database(1: string name)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  Database get_database_req(1: GetDatabaseRequest request)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  void drop_database(1: string name, 2: bool deleteData, 3: bool cascade)
      throws (1: NoSuchObjectException o1, 2: InvalidOperationException o2, 3: MetaException o3)
  void drop_database_req(1: DropDatabaseRequest req)
      throws (1: NoSuchObjectException o1, 2: InvalidOperationException o2, 3: MetaException o3)
  list<string> get_databases(1: string pattern)
      throws (1: MetaException o1)
  list<string> get_all_databases()
      throws (1: MetaException o1)
  void alter_database(1: string dbname, 2: Database db)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  void alter_database_req(1: AlterDatabaseRequest alterDbReq)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)

  // -- Data connectors
  void create_dataconnector_req(1: CreateDataConnectorRequest connectorReq)
      throws (1: AlreadyExistsException o1, 2: InvalidObjectException o2, 3: MetaException o3)
  DataConnector get_dataconnector_req(1: GetDataConnectorRequest request)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  void drop_dataconnector_req(1: DropDataConnectorRequest dropDcReq)
      throws (1: NoSuchObjectException o1, 2: InvalidOperationException o2, 3: MetaException o3)
  list<string> get_dataconnectors()
      throws (1: MetaException o1)
  void alter_dataconnector_req(1: AlterDataConnectorRequest alterReq)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  // legacy: Hive 4.0 alpha spelling; later releases use create_dataconnector_req.
  void create_dataconnector(1: DataConnector connector)
      throws (1: AlreadyExistsException o1, 2: InvalidObjectException o2, 3: MetaException o3)
  // legacy: Hive 4.0 alpha spelling (its two flags had no field ids and are not declared here);
  // later releases use drop_dataconnector_req.
  void drop_dataconnector(1: string name)
      throws (1: NoSuchObjectException o1, 2: InvalidOperationException o2, 3: MetaException o3)
  // legacy: Hive 4.0 alpha spelling; later releases use alter_dataconnector_req.
  void alter_dataconnector(1: string name, 2: DataConnector connector)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)

  // -- User-defined types
  Type get_type(1: string name)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  bool create_type(1: Type type)
      throws (1: AlreadyExistsException o1, 2: InvalidObjectException o2, 3: MetaException o3)
  bool drop_type(1: string type)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  map<string, Type> get_type_all(1: string name)
      throws (1: MetaException o2)

  // -- Table columns
  list<FieldSchema> get_fields(1: string db_name, 2: string table_name)
      throws (1: MetaException o1, 2: UnknownTableException o2, 3: UnknownDBException o3)
  list<FieldSchema> get_fields_with_environment_context(
      1: string db_name,
      2: string table_name,
      3: EnvironmentContext environment_context)
      throws (1: MetaException o1, 2: UnknownTableException o2, 3: UnknownDBException o3)
  GetFieldsResponse get_fields_req(1: GetFieldsRequest req)
      throws (1: MetaException o1, 2: UnknownTableException o2, 3: UnknownDBException o3)
  list<FieldSchema> get_schema(1: string db_name, 2: string table_name)
      throws (1: MetaException o1, 2: UnknownTableException o2, 3: UnknownDBException o3)
  list<FieldSchema> get_schema_with_environment_context(
      1: string db_name,
      2: string table_name,
      3: EnvironmentContext environment_context)
      throws (1: MetaException o1, 2: UnknownTableException o2, 3: UnknownDBException o3)
  GetSchemaResponse get_schema_req(1: GetSchemaRequest req)
      throws (1: MetaException o1, 2: UnknownTableException o2, 3: UnknownDBException o3)

  // -- Tables and materialized views
  void create_table(1: Table tbl)
      throws (
          1: AlreadyExistsException o1,
          2: InvalidObjectException o2,
          3: MetaException o3,
          4: NoSuchObjectException o4)
  void create_table_with_environment_context(
      1: Table tbl,
      2: EnvironmentContext environment_context)
      throws (
          1: AlreadyExistsException o1,
          2: InvalidObjectException o2,
          3: MetaException o3,
          4: NoSuchObjectException o4)
  void create_table_with_constraints(
      1: Table tbl,
      2: list<SQLPrimaryKey> primaryKeys,
      3: list<SQLForeignKey> foreignKeys,
      4: list<SQLUniqueConstraint> uniqueConstraints,
      5: list<SQLNotNullConstraint> notNullConstraints,
      6: list<SQLDefaultConstraint> defaultConstraints,
      7: list<SQLCheckConstraint> checkConstraints)
      throws (
          1: AlreadyExistsException o1,
          2: InvalidObjectException o2,
          3: MetaException o3,
          4: NoSuchObjectException o4)
  void create_table_req(1: CreateTableRequest request)
      throws (
          1: AlreadyExistsException o1,
          2: InvalidObjectException o2,
          3: MetaException o3,
          4: NoSuchObjectException o4)
  Table translate_table_dryrun(1: CreateTableRequest request)
      throws (
          1: AlreadyExistsException o1,
          2: InvalidObjectException o2,
          3: MetaException o3,
          4: NoSuchObjectException o4)
  void drop_table(1: string dbname, 2: string name, 3: bool deleteData)
      throws (1: NoSuchObjectException o1, 2: MetaException o3)
  void drop_table_with_environment_context(
      1: string dbname,
      2: string name,
      3: bool deleteData,
      4: EnvironmentContext environment_context)
      throws (1: NoSuchObjectException o1, 2: MetaException o3)
  void drop_table_req(1: DropTableRequest dropTableReq)
      throws (1: NoSuchObjectException o1, 2: MetaException o3)
  void truncate_table(1: string dbName, 2: string tableName, 3: list<string> partNames)
      throws (1: MetaException o1)
  TruncateTableResponse truncate_table_req(1: TruncateTableRequest req)
      throws (1: MetaException o1)
  list<string> get_tables(1: string db_name, 2: string pattern)
      throws (1: MetaException o1)
  list<string> get_tables_by_type(1: string db_name, 2: string pattern, 3: string tableType)
      throws (1: MetaException o1)
  list<Table> get_all_materialized_view_objects_for_rewriting()
      throws (1: MetaException o1)
  list<string> get_materialized_views_for_rewriting(1: string db_name)
      throws (1: MetaException o1)
  list<TableMeta> get_table_meta(
      1: string db_patterns,
      2: string tbl_patterns,
      3: list<string> tbl_types)
      throws (1: MetaException o1)
  list<string> get_all_tables(1: string db_name)
      throws (1: MetaException o1)
  list<ExtendedTableInfo> get_tables_ext(1: GetTablesExtRequest req)
      throws (1: MetaException o1)
  GetTableResult get_table_req(1: GetTableRequest req)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  GetTablesResult get_table_objects_by_name_req(1: GetTablesRequest req)
      throws (1: MetaException o1, 2: InvalidOperationException o2, 3: UnknownDBException o3)
  // Signature changed in Hive 3.1; older clients sent (dbname, tbl_names).
  Materialization get_materialization_invalidation_info(
      1: CreationMetadata creation_metadata,
      2: string validTxnList)
      throws (1: MetaException o1, 2: InvalidOperationException o2, 3: UnknownDBException o3)
  void update_creation_metadata(
      1: string catName,
      2: string dbname,
      3: string tbl_name,
      4: CreationMetadata creation_metadata)
      throws (1: MetaException o1, 2: InvalidOperationException o2, 3: UnknownDBException o3)
  list<string> get_table_names_by_filter(1: string dbname, 2: string filter, 3: i16 max_tables = -1)
      throws (1: MetaException o1, 2: InvalidOperationException o2, 3: UnknownDBException o3)
  void alter_table(1: string dbname, 2: string tbl_name, 3: Table new_tbl)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  void alter_table_with_environment_context(
      1: string dbname,
      2: string tbl_name,
      3: Table new_tbl,
      4: EnvironmentContext environment_context)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  void alter_table_with_cascade(
      1: string dbname,
      2: string tbl_name,
      3: Table new_tbl,
      4: bool cascade)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  AlterTableResponse alter_table_req(1: AlterTableRequest req)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  // legacy: Hive 2.x/3.x; gone from current Hive 4 (use get_table_req).
  Table get_table(1: string dbname, 2: string tbl_name)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  // legacy: Hive 2.x/3.x; gone from current Hive 4 (use get_table_objects_by_name_req).
  list<Table> get_table_objects_by_name(1: string dbname, 2: list<string> tbl_names)
      throws (1: MetaException o1, 2: InvalidOperationException o2, 3: UnknownDBException o3)

  // -- Constraints
  void drop_constraint(1: DropConstraintRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o3)
  void add_primary_key(1: AddPrimaryKeyRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  void add_foreign_key(1: AddForeignKeyRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  void add_unique_constraint(1: AddUniqueConstraintRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  void add_not_null_constraint(1: AddNotNullConstraintRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  void add_default_constraint(1: AddDefaultConstraintRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  void add_check_constraint(1: AddCheckConstraintRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  PrimaryKeysResponse get_primary_keys(1: PrimaryKeysRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  ForeignKeysResponse get_foreign_keys(1: ForeignKeysRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  UniqueConstraintsResponse get_unique_constraints(1: UniqueConstraintsRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  NotNullConstraintsResponse get_not_null_constraints(1: NotNullConstraintsRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  DefaultConstraintsResponse get_default_constraints(1: DefaultConstraintsRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  CheckConstraintsResponse get_check_constraints(1: CheckConstraintsRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  AllTableConstraintsResponse get_all_table_constraints(1: AllTableConstraintsRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)

  // -- Partitions: create, append, drop
  Partition add_partition(1: Partition new_part)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  Partition add_partition_with_environment_context(
      1: Partition new_part,
      2: EnvironmentContext environment_context)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  i32 add_partitions(1: list<Partition> new_parts)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  i32 add_partitions_pspec(1: list<PartitionSpec> new_parts)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  Partition append_partition(1: string db_name, 2: string tbl_name, 3: list<string> part_vals)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  AddPartitionsResult add_partitions_req(1: AddPartitionsRequest request)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  Partition append_partition_with_environment_context(
      1: string db_name,
      2: string tbl_name,
      3: list<string> part_vals,
      4: EnvironmentContext environment_context)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  Partition append_partition_req(1: AppendPartitionsRequest appendPartitionsReq)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  Partition append_partition_by_name(1: string db_name, 2: string tbl_name, 3: string part_name)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  Partition append_partition_by_name_with_environment_context(
      1: string db_name,
      2: string tbl_name,
      3: string part_name,
      4: EnvironmentContext environment_context)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  bool drop_partition(
      1: string db_name,
      2: string tbl_name,
      3: list<string> part_vals,
      4: bool deleteData)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  bool drop_partition_with_environment_context(
      1: string db_name,
      2: string tbl_name,
      3: list<string> part_vals,
      4: bool deleteData,
      5: EnvironmentContext environment_context)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  bool drop_partition_req(1: DropPartitionRequest dropPartitionReq)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  bool drop_partition_by_name(
      1: string db_name,
      2: string tbl_name,
      3: string part_name,
      4: bool deleteData)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  bool drop_partition_by_name_with_environment_context(
      1: string db_name,
      2: string tbl_name,
      3: string part_name,
      4: bool deleteData,
      5: EnvironmentContext environment_context)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  DropPartitionsResult drop_partitions_req(1: DropPartitionsRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)

  // -- Partitions: read
  Partition get_partition(1: string db_name, 2: string tbl_name, 3: list<string> part_vals)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  GetPartitionResponse get_partition_req(1: GetPartitionRequest req)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  Partition get_partition_with_auth(
      1: string db_name,
      2: string tbl_name,
      3: list<string> part_vals,
      4: string user_name,
      5: list<string> group_names)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  Partition get_partition_by_name(1: string db_name, 2: string tbl_name, 3: string part_name)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  // hive-metastore-client (3.x) sends max_parts as i32; upstream Hive uses i16.
  list<Partition> get_partitions(1: string db_name, 2: string tbl_name, 3: i16 max_parts = -1)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  PartitionsResponse get_partitions_req(1: PartitionsRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  list<Partition> get_partitions_with_auth(
      1: string db_name,
      2: string tbl_name,
      3: i16 max_parts = -1,
      4: string user_name,
      5: list<string> group_names)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  list<PartitionSpec> get_partitions_pspec(
      1: string db_name,
      2: string tbl_name,
      3: i32 max_parts = -1)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  // Hive 2.x declared only MetaException, at exception id 1.
  list<string> get_partition_names(1: string db_name, 2: string tbl_name, 3: i16 max_parts = -1)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  list<string> fetch_partition_names_req(1: PartitionsRequest partitionReq)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  PartitionValuesResponse get_partition_values(1: PartitionValuesRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  list<Partition> get_partitions_ps(
      1: string db_name,
      2: string tbl_name,
      3: list<string> part_vals,
      4: i16 max_parts = -1)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  list<Partition> get_partitions_ps_with_auth(
      1: string db_name,
      2: string tbl_name,
      3: list<string> part_vals,
      4: i16 max_parts = -1,
      5: string user_name,
      6: list<string> group_names)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  GetPartitionsPsWithAuthResponse get_partitions_ps_with_auth_req(
      1: GetPartitionsPsWithAuthRequest req)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  list<string> get_partition_names_ps(
      1: string db_name,
      2: string tbl_name,
      3: list<string> part_vals,
      4: i16 max_parts = -1)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  GetPartitionNamesPsResponse get_partition_names_ps_req(1: GetPartitionNamesPsRequest req)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  list<string> get_partition_names_req(1: PartitionsByExprRequest req)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  list<Partition> get_partitions_by_filter(
      1: string db_name,
      2: string tbl_name,
      3: string filter,
      4: i16 max_parts = -1)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  list<Partition> get_partitions_by_filter_req(1: GetPartitionsByFilterRequest req)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  list<PartitionSpec> get_part_specs_by_filter(
      1: string db_name,
      2: string tbl_name,
      3: string filter,
      4: i32 max_parts = -1)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  PartitionsByExprResult get_partitions_by_expr(1: PartitionsByExprRequest req)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  PartitionsSpecByExprResult get_partitions_spec_by_expr(1: PartitionsByExprRequest req)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  i32 get_num_partitions_by_filter(1: string db_name, 2: string tbl_name, 3: string filter)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  list<Partition> get_partitions_by_names(
      1: string db_name,
      2: string tbl_name,
      3: list<string> names)
      throws (1: MetaException o1, 2: NoSuchObjectException o2, 3: InvalidObjectException o3)
  GetPartitionsByNamesResult get_partitions_by_names_req(1: GetPartitionsByNamesRequest req)
      throws (1: MetaException o1, 2: NoSuchObjectException o2, 3: InvalidObjectException o3)
  GetPartitionsResponse get_partitions_with_specs(1: GetPartitionsRequest request)
      throws (1: MetaException o1)

  // -- Partitions: alter, rename, exchange
  Partition exchange_partition(
      1: map<string, string> partitionSpecs,
      2: string source_db,
      3: string source_table_name,
      4: string dest_db,
      5: string dest_table_name)
      throws (
          1: MetaException o1,
          2: NoSuchObjectException o2,
          3: InvalidObjectException o3,
          4: InvalidInputException o4)
  list<Partition> exchange_partitions(
      1: map<string, string> partitionSpecs,
      2: string source_db,
      3: string source_table_name,
      4: string dest_db,
      5: string dest_table_name)
      throws (
          1: MetaException o1,
          2: NoSuchObjectException o2,
          3: InvalidObjectException o3,
          4: InvalidInputException o4)
  void alter_partition(1: string db_name, 2: string tbl_name, 3: Partition new_part)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  void alter_partitions(1: string db_name, 2: string tbl_name, 3: list<Partition> new_parts)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  void alter_partitions_with_environment_context(
      1: string db_name,
      2: string tbl_name,
      3: list<Partition> new_parts,
      4: EnvironmentContext environment_context)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  AlterPartitionsResponse alter_partitions_req(1: AlterPartitionsRequest req)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  void alter_partition_with_environment_context(
      1: string db_name,
      2: string tbl_name,
      3: Partition new_part,
      4: EnvironmentContext environment_context)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  void rename_partition(
      1: string db_name,
      2: string tbl_name,
      3: list<string> part_vals,
      4: Partition new_part)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  RenamePartitionResponse rename_partition_req(1: RenamePartitionRequest req)
      throws (1: InvalidOperationException o1, 2: MetaException o2)

  // -- Partition names and events
  bool partition_name_has_valid_characters(1: list<string> part_vals, 2: bool throw_exception)
      throws (1: MetaException o1)
  list<string> partition_name_to_vals(1: string part_name)
      throws (1: MetaException o1)
  map<string, string> partition_name_to_spec(1: string part_name)
      throws (1: MetaException o1)
  void markPartitionForEvent(
      1: string db_name,
      2: string tbl_name,
      3: map<string, string> part_vals,
      4: PartitionEventType eventType)
      throws (
          1: MetaException o1,
          2: NoSuchObjectException o2,
          3: UnknownDBException o3,
          4: UnknownTableException o4,
          5: UnknownPartitionException o5,
          6: InvalidPartitionException o6)
  bool isPartitionMarkedForEvent(
      1: string db_name,
      2: string tbl_name,
      3: map<string, string> part_vals,
      4: PartitionEventType eventType)
      throws (
          1: MetaException o1,
          2: NoSuchObjectException o2,
          3: UnknownDBException o3,
          4: UnknownTableException o4,
          5: UnknownPartitionException o5,
          6: InvalidPartitionException o6)

  // -- Column statistics
  bool update_table_column_statistics(1: ColumnStatistics stats_obj)
      throws (
          1: NoSuchObjectException o1,
          2: InvalidObjectException o2,
          3: MetaException o3,
          4: InvalidInputException o4)
  bool update_partition_column_statistics(1: ColumnStatistics stats_obj)
      throws (
          1: NoSuchObjectException o1,
          2: InvalidObjectException o2,
          3: MetaException o3,
          4: InvalidInputException o4)
  SetPartitionsStatsResponse update_table_column_statistics_req(1: SetPartitionsStatsRequest req)
      throws (
          1: NoSuchObjectException o1,
          2: InvalidObjectException o2,
          3: MetaException o3,
          4: InvalidInputException o4)
  SetPartitionsStatsResponse update_partition_column_statistics_req(
      1: SetPartitionsStatsRequest req)
      throws (
          1: NoSuchObjectException o1,
          2: InvalidObjectException o2,
          3: MetaException o3,
          4: InvalidInputException o4)
  void update_transaction_statistics(1: UpdateTransactionalStatsRequest req)
      throws (1: MetaException o1)
  ColumnStatistics get_table_column_statistics(
      1: string db_name,
      2: string tbl_name,
      3: string col_name)
      throws (
          1: NoSuchObjectException o1,
          2: MetaException o2,
          3: InvalidInputException o3,
          4: InvalidObjectException o4)
  ColumnStatistics get_partition_column_statistics(
      1: string db_name,
      2: string tbl_name,
      3: string part_name,
      4: string col_name)
      throws (
          1: NoSuchObjectException o1,
          2: MetaException o2,
          3: InvalidInputException o3,
          4: InvalidObjectException o4)
  TableStatsResult get_table_statistics_req(1: TableStatsRequest request)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  PartitionsStatsResult get_partitions_statistics_req(1: PartitionsStatsRequest request)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  AggrStats get_aggr_stats_for(1: PartitionsStatsRequest request)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  bool set_aggr_stats_for(1: SetPartitionsStatsRequest request)
      throws (
          1: NoSuchObjectException o1,
          2: InvalidObjectException o2,
          3: MetaException o3,
          4: InvalidInputException o4)
  bool delete_partition_column_statistics(
      1: string db_name,
      2: string tbl_name,
      3: string part_name,
      4: string col_name,
      5: string engine)
      throws (
          1: NoSuchObjectException o1,
          2: MetaException o2,
          3: InvalidObjectException o3,
          4: InvalidInputException o4)
  bool delete_table_column_statistics(
      1: string db_name,
      2: string tbl_name,
      3: string col_name,
      4: string engine)
      throws (
          1: NoSuchObjectException o1,
          2: MetaException o2,
          3: InvalidObjectException o3,
          4: InvalidInputException o4)

  // -- Functions
  void create_function(1: Function func)
      throws (
          1: AlreadyExistsException o1,
          2: InvalidObjectException o2,
          3: MetaException o3,
          4: NoSuchObjectException o4)
  void drop_function(1: string dbName, 2: string funcName)
      throws (1: NoSuchObjectException o1, 2: MetaException o3)
  void alter_function(1: string dbName, 2: string funcName, 3: Function newFunc)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  list<string> get_functions(1: string dbName, 2: string pattern)
      throws (1: MetaException o1)
  Function get_function(1: string dbName, 2: string funcName)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  GetAllFunctionsResponse get_all_functions()
      throws (1: MetaException o1)

  // -- Roles and privileges
  bool create_role(1: Role role)
      throws (1: MetaException o1)
  bool drop_role(1: string role_name)
      throws (1: MetaException o1)
  list<string> get_role_names()
      throws (1: MetaException o1)
  bool grant_role(
      1: string role_name,
      2: string principal_name,
      3: PrincipalType principal_type,
      4: string grantor,
      5: PrincipalType grantorType,
      6: bool grant_option)
      throws (1: MetaException o1)
  bool revoke_role(1: string role_name, 2: string principal_name, 3: PrincipalType principal_type)
      throws (1: MetaException o1)
  list<Role> list_roles(1: string principal_name, 2: PrincipalType principal_type)
      throws (1: MetaException o1)
  GrantRevokeRoleResponse grant_revoke_role(1: GrantRevokeRoleRequest request)
      throws (1: MetaException o1)
  GetPrincipalsInRoleResponse get_principals_in_role(1: GetPrincipalsInRoleRequest request)
      throws (1: MetaException o1)
  GetRoleGrantsForPrincipalResponse get_role_grants_for_principal(
      1: GetRoleGrantsForPrincipalRequest request)
      throws (1: MetaException o1)
  PrincipalPrivilegeSet get_privilege_set(
      1: HiveObjectRef hiveObject,
      2: string user_name,
      3: list<string> group_names)
      throws (1: MetaException o1)
  list<HiveObjectPrivilege> list_privileges(
      1: string principal_name,
      2: PrincipalType principal_type,
      3: HiveObjectRef hiveObject)
      throws (1: MetaException o1)
  bool grant_privileges(1: PrivilegeBag privileges)
      throws (1: MetaException o1)
  bool revoke_privileges(1: PrivilegeBag privileges)
      throws (1: MetaException o1)
  GrantRevokePrivilegeResponse grant_revoke_privileges(1: GrantRevokePrivilegeRequest request)
      throws (1: MetaException o1)
  // Before Hive 3.1 the request was argument 2 (no authorizer).
  GrantRevokePrivilegeResponse refresh_privileges(
      1: HiveObjectRef objToRefresh,
      2: string authorizer,
      3: GrantRevokePrivilegeRequest grantRequest)
      throws (1: MetaException o1)

  // -- Delegation tokens and master keys
  string get_delegation_token(1: string token_owner, 2: string renewer_kerberos_principal_name)
      throws (1: MetaException o1)
  i64 renew_delegation_token(1: string token_str_form)
      throws (1: MetaException o1)
  void cancel_delegation_token(1: string token_str_form)
      throws (1: MetaException o1)
  bool add_token(1: string token_identifier, 2: string delegation_token)
  bool remove_token(1: string token_identifier)
  string get_token(1: string token_identifier)
  list<string> get_all_token_identifiers()
  i32 add_master_key(1: string key)
      throws (1: MetaException o1)
  void update_master_key(1: i32 seq_number, 2: string key)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  bool remove_master_key(1: i32 key_seq)
  list<string> get_master_keys()

  // -- Transactions and write ids
  GetOpenTxnsResponse get_open_txns()
  GetOpenTxnsInfoResponse get_open_txns_info()
  OpenTxnsResponse open_txns(1: OpenTxnRequest rqst)
  void abort_txn(1: AbortTxnRequest rqst)
      throws (1: NoSuchTxnException o1)
  void abort_txns(1: AbortTxnsRequest rqst)
      throws (1: NoSuchTxnException o1)
  void commit_txn(1: CommitTxnRequest rqst)
      throws (1: NoSuchTxnException o1, 2: TxnAbortedException o2)
  i64 get_latest_txnid_in_conflict(1: i64 txnId)
      throws (1: MetaException o1)
  void repl_tbl_writeid_state(1: ReplTblWriteIdStateRequest rqst)
  GetValidWriteIdsResponse get_valid_write_ids(1: GetValidWriteIdsRequest rqst)
      throws (1: NoSuchTxnException o1, 2: MetaException o2)
  void add_write_ids_to_min_history(1: i64 txnId, 2: map<string, i64> writeIds)
      throws (1: MetaException o2)
  AllocateTableWriteIdsResponse allocate_table_write_ids(1: AllocateTableWriteIdsRequest rqst)
      throws (1: NoSuchTxnException o1, 2: TxnAbortedException o2, 3: MetaException o3)
  MaxAllocatedTableWriteIdResponse get_max_allocated_table_write_id(
      1: MaxAllocatedTableWriteIdRequest rqst)
      throws (1: MetaException o1)
  void seed_write_id(1: SeedTableWriteIdsRequest rqst)
      throws (1: MetaException o1)
  void seed_txn_id(1: SeedTxnIdRequest rqst)
      throws (1: MetaException o1)
  void add_dynamic_partitions(1: AddDynamicPartitions rqst)
      throws (1: NoSuchTxnException o1, 2: TxnAbortedException o2)
  GetOpenTxnsResponse get_open_txns_req(1: GetOpenTxnsRequest getOpenTxnsRequest)
  list<WriteEventInfo> get_all_write_event_info(1: GetAllWriteEventInfoRequest request)
      throws (1: MetaException o1)

  // -- Locks
  LockResponse lock(1: LockRequest rqst)
      throws (1: NoSuchTxnException o1, 2: TxnAbortedException o2)
  LockResponse check_lock(1: CheckLockRequest rqst)
      throws (1: NoSuchTxnException o1, 2: TxnAbortedException o2, 3: NoSuchLockException o3)
  void unlock(1: UnlockRequest rqst)
      throws (1: NoSuchLockException o1, 2: TxnOpenException o2)
  ShowLocksResponse show_locks(1: ShowLocksRequest rqst)
  void heartbeat(1: HeartbeatRequest ids)
      throws (1: NoSuchLockException o1, 2: NoSuchTxnException o2, 3: TxnAbortedException o3)
  HeartbeatTxnRangeResponse heartbeat_txn_range(1: HeartbeatTxnRangeRequest txns)
  LockResponse get_lock_materialization_rebuild(1: string dbName, 2: string tableName, 3: i64 txnId)
  bool heartbeat_lock_materialization_rebuild(1: string dbName, 2: string tableName, 3: i64 txnId)

  // -- Compaction
  AbortCompactResponse abort_Compactions(1: AbortCompactionRequest rqst)
  void compact(1: CompactionRequest rqst)
  CompactionResponse compact2(1: CompactionRequest rqst)
  ShowCompactResponse show_compact(1: ShowCompactRequest rqst)
  bool submit_for_cleanup(1: CompactionRequest o1, 2: i64 o2, 3: i64 o3)
      throws (1: MetaException o1)
  OptionalCompactionInfoStruct find_next_compact(1: string workerId)
      throws (1: MetaException o1)
  OptionalCompactionInfoStruct find_next_compact2(1: FindNextCompactRequest rqst)
      throws (1: MetaException o1)
  void update_compactor_state(1: CompactionInfoStruct cr, 2: i64 txn_id)
  list<string> find_columns_with_stats(1: CompactionInfoStruct cr)
  void mark_cleaned(1: CompactionInfoStruct cr)
      throws (1: MetaException o1)
  void mark_compacted(1: CompactionInfoStruct cr)
      throws (1: MetaException o1)
  void mark_failed(1: CompactionInfoStruct cr)
      throws (1: MetaException o1)
  void mark_refused(1: CompactionInfoStruct cr)
      throws (1: MetaException o1)
  bool update_compaction_metrics_data(1: CompactionMetricsDataStruct data)
      throws (1: MetaException o1)
  void remove_compaction_metrics_data(1: CompactionMetricsDataRequest request)
      throws (1: MetaException o1)
  void set_hadoop_jobid(1: string jobId, 2: i64 cq_id)
  GetLatestCommittedCompactionInfoResponse get_latest_committed_compaction_info(
      1: GetLatestCommittedCompactionInfoRequest rqst)

  // -- Notification log
  NotificationEventResponse get_next_notification(1: NotificationEventRequest rqst)
  CurrentNotificationEventId get_current_notificationEventId()
  NotificationEventsCountResponse get_notification_events_count(
      1: NotificationEventsCountRequest rqst)
  FireEventResponse fire_listener_event(1: FireEventRequest rqst)
  WriteNotificationLogResponse add_write_notification_log(1: WriteNotificationLogRequest rqst)
  WriteNotificationLogBatchResponse add_write_notification_log_in_batch(
      1: WriteNotificationLogBatchRequest rqst)

  // -- Replication and change management
  CmRecycleResponse cm_recycle(1: CmRecycleRequest request)
      throws (1: MetaException o1)
  void add_replication_metrics(1: ReplicationMetricList replicationMetricList)
      throws (1: MetaException o1)
  ReplicationMetricList get_replication_metrics(1: GetReplicationMetricsRequest rqst)
      throws (1: MetaException o1)

  // -- File metadata cache
  GetFileMetadataByExprResult get_file_metadata_by_expr(1: GetFileMetadataByExprRequest req)
  GetFileMetadataResult get_file_metadata(1: GetFileMetadataRequest req)
  PutFileMetadataResult put_file_metadata(1: PutFileMetadataRequest req)
  ClearFileMetadataResult clear_file_metadata(1: ClearFileMetadataRequest req)
  CacheFileMetadataResult cache_file_metadata(1: CacheFileMetadataRequest req)

  // -- Workload management
  WMCreateResourcePlanResponse create_resource_plan(1: WMCreateResourcePlanRequest request)
      throws (1: AlreadyExistsException o1, 2: InvalidObjectException o2, 3: MetaException o3)
  WMGetResourcePlanResponse get_resource_plan(1: WMGetResourcePlanRequest request)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  WMGetActiveResourcePlanResponse get_active_resource_plan(
      1: WMGetActiveResourcePlanRequest request)
      throws (1: MetaException o2)
  WMGetAllResourcePlanResponse get_all_resource_plans(1: WMGetAllResourcePlanRequest request)
      throws (1: MetaException o1)
  WMAlterResourcePlanResponse alter_resource_plan(1: WMAlterResourcePlanRequest request)
      throws (1: NoSuchObjectException o1, 2: InvalidOperationException o2, 3: MetaException o3)
  WMValidateResourcePlanResponse validate_resource_plan(1: WMValidateResourcePlanRequest request)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  WMDropResourcePlanResponse drop_resource_plan(1: WMDropResourcePlanRequest request)
      throws (1: NoSuchObjectException o1, 2: InvalidOperationException o2, 3: MetaException o3)
  WMCreateTriggerResponse create_wm_trigger(1: WMCreateTriggerRequest request)
      throws (
          1: AlreadyExistsException o1,
          2: NoSuchObjectException o2,
          3: InvalidObjectException o3,
          4: MetaException o4)
  WMAlterTriggerResponse alter_wm_trigger(1: WMAlterTriggerRequest request)
      throws (1: NoSuchObjectException o1, 2: InvalidObjectException o2, 3: MetaException o3)
  WMDropTriggerResponse drop_wm_trigger(1: WMDropTriggerRequest request)
      throws (1: NoSuchObjectException o1, 2: InvalidOperationException o2, 3: MetaException o3)
  WMGetTriggersForResourePlanResponse get_triggers_for_resourceplan(
      1: WMGetTriggersForResourePlanRequest request)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  WMCreatePoolResponse create_wm_pool(1: WMCreatePoolRequest request)
      throws (
          1: AlreadyExistsException o1,
          2: NoSuchObjectException o2,
          3: InvalidObjectException o3,
          4: MetaException o4)
  WMAlterPoolResponse alter_wm_pool(1: WMAlterPoolRequest request)
      throws (
          1: AlreadyExistsException o1,
          2: NoSuchObjectException o2,
          3: InvalidObjectException o3,
          4: MetaException o4)
  WMDropPoolResponse drop_wm_pool(1: WMDropPoolRequest request)
      throws (1: NoSuchObjectException o1, 2: InvalidOperationException o2, 3: MetaException o3)
  WMCreateOrUpdateMappingResponse create_or_update_wm_mapping(
      1: WMCreateOrUpdateMappingRequest request)
      throws (
          1: AlreadyExistsException o1,
          2: NoSuchObjectException o2,
          3: InvalidObjectException o3,
          4: MetaException o4)
  WMDropMappingResponse drop_wm_mapping(1: WMDropMappingRequest request)
      throws (1: NoSuchObjectException o1, 2: InvalidOperationException o2, 3: MetaException o3)
  WMCreateOrDropTriggerToPoolMappingResponse create_or_drop_wm_trigger_to_pool_mapping(
      1: WMCreateOrDropTriggerToPoolMappingRequest request)
      throws (
          1: AlreadyExistsException o1,
          2: NoSuchObjectException o2,
          3: InvalidObjectException o3,
          4: MetaException o4)

  // -- Schema registry and serdes
  void create_ischema(1: ISchema schema)
      throws (1: AlreadyExistsException o1, 2: NoSuchObjectException o2, 3: MetaException o3)
  void alter_ischema(1: AlterISchemaRequest rqst)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  ISchema get_ischema(1: ISchemaName name)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  void drop_ischema(1: ISchemaName name)
      throws (1: NoSuchObjectException o1, 2: InvalidOperationException o2, 3: MetaException o3)
  void add_schema_version(1: SchemaVersion schemaVersion)
      throws (1: AlreadyExistsException o1, 2: NoSuchObjectException o2, 3: MetaException o3)
  SchemaVersion get_schema_version(1: SchemaVersionDescriptor schemaVersion)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  SchemaVersion get_schema_latest_version(1: ISchemaName schemaName)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  list<SchemaVersion> get_schema_all_versions(1: ISchemaName schemaName)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  void drop_schema_version(1: SchemaVersionDescriptor schemaVersion)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  FindSchemasByColsResp get_schemas_by_cols(1: FindSchemasByColsRqst rqst)
      throws (1: MetaException o1)
  void map_schema_version_to_serde(1: MapSchemaVersionToSerdeRequest rqst)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  void set_schema_version_state(1: SetSchemaVersionStateRequest rqst)
      throws (1: NoSuchObjectException o1, 2: InvalidOperationException o2, 3: MetaException o3)
  void add_serde(1: SerDeInfo serde)
      throws (1: AlreadyExistsException o1, 2: MetaException o2)
  SerDeInfo get_serde(1: GetSerdeRequest rqst)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)

  // -- Runtime statistics
  void add_runtime_stats(1: RuntimeStat stat)
      throws (1: MetaException o1)
  list<RuntimeStat> get_runtime_stats(1: GetRuntimeStatsRequest rqst)
      throws (1: MetaException o1)

  // -- Scheduled queries
  ScheduledQueryPollResponse scheduled_query_poll(1: ScheduledQueryPollRequest request)
      throws (1: MetaException o1)
  void scheduled_query_maintenance(1: ScheduledQueryMaintenanceRequest request)
      throws (
          1: MetaException o1,
          2: NoSuchObjectException o2,
          3: AlreadyExistsException o3,
          4: InvalidInputException o4)
  void scheduled_query_progress(1: ScheduledQueryProgressInfo info)
      throws (1: MetaException o1, 2: InvalidOperationException o2)
  ScheduledQuery get_scheduled_query(1: ScheduledQueryKey scheduleKey)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)

  // -- Stored procedures
  void create_stored_procedure(1: StoredProcedure proc)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  StoredProcedure get_stored_procedure(1: StoredProcedureRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  void drop_stored_procedure(1: StoredProcedureRequest request)
      throws (1: MetaException o1)
  list<string> get_all_stored_procedures(1: ListStoredProcedureRequest request)
      throws (1: MetaException o1)

  // -- Packages
  Package find_package(1: GetPackageRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  void add_package(1: AddPackageRequest request)
      throws (1: MetaException o1)
  list<string> get_all_packages(1: ListPackageRequest request)
      throws (1: MetaException o1)
  void drop_package(1: DropPackageRequest request)
      throws (1: MetaException o1)

  // -- Indexes (Hive 2.x only; removed in Hive 3)
  Index add_index(1: Index new_index, 2: Table index_table)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  void alter_index(1: string dbname, 2: string base_tbl_name, 3: string idx_name, 4: Index new_idx)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  bool drop_index_by_name(
      1: string db_name,
      2: string tbl_name,
      3: string index_name,
      4: bool deleteData)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  Index get_index_by_name(1: string db_name, 2: string tbl_name, 3: string index_name)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  list<Index> get_indexes(1: string db_name, 2: string tbl_name, 3: i16 max_indexes = -1)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  list<string> get_index_names(1: string db_name, 2: string tbl_name, 3: i16 max_indexes = -1)
      throws (1: MetaException o2)
}
