/*
 * Concurrent Iceberg writers of one table, in one JVM, through both of waggle's doors: REST writers use Iceberg's
 * own org.apache.iceberg.rest.RESTCatalog (over the JDK's HTTP client: IcebergJdkRest.java says why) against the
 * Iceberg REST port, Thrift writers Iceberg's
 * org.apache.iceberg.hive.HiveCatalog against waggle's Thrift port. Each writer loads the table once and appends one
 * data file (a path that names no real file, with a record count) per commit; a commit that loses a race is retried
 * by Iceberg's own SnapshotProducer.commit (commit.retry.num-retries, a table property set at creation).
 *   IcebergWritersCheck <rest-uri> <credential> <warehouse> <thrift-uri> <namespace> <table> <rest-writers>
 *                       <thrift-writers> <appends>
 * creates the table (through REST), runs the writers from one start signal and prints one line
 *   RESULT {"commits": n, "attempts": [...], "failures": [...], "rest": {...}, "thrift": {...}}
 * where attempts are the attempt counts of every commit (Iceberg's CommitReport: more than 1 = retried), and
 * rest/thrift are the final table as each door loads it: snapshots, data files and records.
 * Used by tests/integration/test_iceberg_rest_writers.py.
 */

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DataFiles;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.hive.HiveCatalog;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.metrics.CommitReport;
import org.apache.iceberg.metrics.MetricsReport;
import org.apache.iceberg.metrics.MetricsReporter;
import org.apache.iceberg.rest.RESTCatalog;
import org.apache.iceberg.types.Types;

public class IcebergWritersCheck {
  /** Each commit's attempt count, as Iceberg reports it (loaded by the catalogs' metrics-reporter-impl). */
  public static final List<Long> ATTEMPTS = Collections.synchronizedList(new ArrayList<>());

  public static class Attempts implements MetricsReporter {
    @Override
    public void report(MetricsReport report) {
      if (report instanceof CommitReport) {
        CommitReport commit = (CommitReport) report;
        ATTEMPTS.add(commit.commitMetrics().attempts() == null ? -1L : commit.commitMetrics().attempts().value());
      }
    }
  }

  static Catalog rest(String uri, String credential, String warehouse) {
    Map<String, String> props = new HashMap<>();
    props.put("uri", uri);
    props.put("credential", credential);
    props.put("warehouse", warehouse);
    props.put("metrics-reporter-impl", Attempts.class.getName());
    RESTCatalog catalog = new IcebergJdkRest.Catalog();
    catalog.setConf(new Configuration());
    catalog.initialize("rest", props);
    return catalog;
  }

  /**
   * A HiveCatalog with Iceberg's default client pool: one pool of 2 clients shared by every HiveCatalog of the JVM
   * with the same configuration, so that a commit's lock, check_lock and unlock may travel on different connections
   * (waggle's lock ids name the member that granted them: see test_iceberg_rest_writers.py).
   */
  static Catalog thrift(String uri, String writer) {
    Map<String, String> props = new HashMap<>();
    props.put("uri", uri);
    props.put("metrics-reporter-impl", Attempts.class.getName());
    HiveCatalog catalog = new HiveCatalog();
    catalog.setConf(new Configuration());
    catalog.initialize("thrift", props);
    return catalog;
  }

  static String describe(Table table) throws Exception {
    int snapshots = 0;
    List<String> ops = new ArrayList<>();
    for (Snapshot s : table.snapshots()) {
      snapshots++;
      if (!ops.contains(s.operation())) {
        ops.add(s.operation());
      }
    }
    int files = 0;
    long records = 0;
    List<String> paths = new ArrayList<>();
    try (CloseableIterable<FileScanTask> tasks = table.newScan().planFiles()) {
      for (FileScanTask task : tasks) {
        files++;
        records += task.file().recordCount();
        paths.add("\"" + task.file().location() + "\"");
      }
    }
    Collections.sort(paths);
    return String.format("{\"snapshots\": %d, \"operations\": \"%s\", \"files\": %d, \"records\": %d, "
        + "\"metadata\": \"%s\", \"paths\": [%s]}", snapshots, String.join(",", ops), files, records,
        ((org.apache.iceberg.HasTableOperations) table).operations().current().metadataFileLocation(),
        String.join(",", paths));
  }

  static String quote(String text) {
    return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
  }

  public static void main(String[] args) throws Exception {
    final String restUri = args[0];
    final String credential = args[1];
    final String warehouse = args[2];
    final String thriftUri = args[3];
    final TableIdentifier ident = TableIdentifier.of(args[4], args[5]);
    final int restWriters = Integer.parseInt(args[6]);
    final int thriftWriters = Integer.parseInt(args[7]);
    final int appends = Integer.parseInt(args[8]);

    Schema schema = new Schema(Types.NestedField.optional(1, "id", Types.LongType.get()));
    Map<String, String> tableProps = new HashMap<>();
    tableProps.put("commit.retry.num-retries", "50");
    tableProps.put("commit.retry.min-wait-ms", "10");
    tableProps.put("commit.retry.max-wait-ms", "500");
    Catalog creator = rest(restUri, credential, warehouse);
    creator.createTable(ident, schema, PartitionSpec.unpartitioned(), tableProps);

    final CountDownLatch start = new CountDownLatch(1);
    final AtomicInteger commits = new AtomicInteger();
    final List<String> failures = Collections.synchronizedList(new ArrayList<>());
    List<Thread> threads = new ArrayList<>();
    for (int w = 0; w < restWriters + thriftWriters; w++) {
      final boolean viaRest = w < restWriters;
      final String writer = (viaRest ? "rest-" : "thrift-") + w;
      Thread thread = new Thread(() -> {
        try {
          Catalog catalog = viaRest ? rest(restUri, credential, warehouse) : thrift(thriftUri, writer);
          Table table = catalog.loadTable(ident);
          start.await();
          for (int i = 0; i < appends; i++) {
            DataFile file = DataFiles.builder(table.spec())
                .withPath(table.location() + "/data/" + writer + "-" + i + ".parquet")
                .withFormat(FileFormat.PARQUET).withFileSizeInBytes(100).withRecordCount(1).build();
            table.newAppend().appendFile(file).commit();
            commits.incrementAndGet();
          }
        } catch (Throwable e) {
          failures.add(writer + ": " + e);
        }
      }, writer);
      thread.start();
      threads.add(thread);
    }
    Thread.sleep(2000);  // every writer has signed in and loaded the table
    start.countDown();
    for (Thread thread : threads) {
      thread.join();
    }
    List<String> attempts = new ArrayList<>();
    synchronized (ATTEMPTS) {
      for (Long a : ATTEMPTS) {
        attempts.add(String.valueOf(a));
      }
    }
    List<String> quoted = new ArrayList<>();
    for (String f : failures) {
      quoted.add(quote(f));
    }
    String viaRest = describe(rest(restUri, credential, warehouse).loadTable(ident));
    String viaThrift = describe(thrift(thriftUri, "reader").loadTable(ident));
    System.out.println("RESULT {\"commits\": " + commits.get() + ", \"attempts\": [" + String.join(",", attempts)
        + "], \"failures\": [" + String.join(",", quoted) + "], \"rest\": " + viaRest + ", \"thrift\": " + viaThrift
        + "}");
    System.exit(0);  // the catalogs' pools and the REST client's refresh threads need not hold the JVM
  }
}
