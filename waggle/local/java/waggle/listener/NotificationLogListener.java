/*
 * waggle's notification log listener for Hive 2.3 metastores.
 *
 * It does what hcatalog's DbNotificationListener does (that class is not among the jars pyspark ships): every
 * metastore change becomes a NotificationEvent, written to NOTIFICATION_LOG through the metastore's own RawStore,
 * with its message built by the metastore's configured MessageFactory (JSONMessageFactory, format json-0.2, by
 * default). Installed as hive.metastore.transactional.event.listeners, the event is written in the same JDO
 * transaction as the change it records: both are committed, or neither.
 *
 * A cleaner thread deletes events older than hive.metastore.event.db.listener.timetolive (default 86400 s) every
 * waggle.listener.cleaner.interval seconds (default 60, DbNotificationListener's period).
 *
 * Built at set-up by waggle/local/listener.py against the Hive jars pyspark ships.
 */
package waggle.listener;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStore.HMSHandler;
import org.apache.hadoop.hive.metastore.MetaStoreEventListener;
import org.apache.hadoop.hive.metastore.MetaStoreEventListenerConstants;
import org.apache.hadoop.hive.metastore.RawStore;
import org.apache.hadoop.hive.metastore.RawStoreProxy;
import org.apache.hadoop.hive.metastore.ReplChangeManager;
import org.apache.hadoop.hive.metastore.Warehouse;
import org.apache.hadoop.hive.metastore.api.Database;
import org.apache.hadoop.hive.metastore.api.Function;
import org.apache.hadoop.hive.metastore.api.Index;
import org.apache.hadoop.hive.metastore.api.MetaException;
import org.apache.hadoop.hive.metastore.api.NotificationEvent;
import org.apache.hadoop.hive.metastore.api.Partition;
import org.apache.hadoop.hive.metastore.api.Table;
import org.apache.hadoop.hive.metastore.events.AddIndexEvent;
import org.apache.hadoop.hive.metastore.events.AddPartitionEvent;
import org.apache.hadoop.hive.metastore.events.AlterIndexEvent;
import org.apache.hadoop.hive.metastore.events.AlterPartitionEvent;
import org.apache.hadoop.hive.metastore.events.AlterTableEvent;
import org.apache.hadoop.hive.metastore.events.ConfigChangeEvent;
import org.apache.hadoop.hive.metastore.events.CreateDatabaseEvent;
import org.apache.hadoop.hive.metastore.events.CreateFunctionEvent;
import org.apache.hadoop.hive.metastore.events.CreateTableEvent;
import org.apache.hadoop.hive.metastore.events.DropDatabaseEvent;
import org.apache.hadoop.hive.metastore.events.DropFunctionEvent;
import org.apache.hadoop.hive.metastore.events.DropIndexEvent;
import org.apache.hadoop.hive.metastore.events.DropPartitionEvent;
import org.apache.hadoop.hive.metastore.events.DropTableEvent;
import org.apache.hadoop.hive.metastore.events.InsertEvent;
import org.apache.hadoop.hive.metastore.events.ListenerEvent;
import org.apache.hadoop.hive.metastore.messaging.MessageFactory;
import org.apache.hadoop.hive.metastore.messaging.PartitionFiles;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public class NotificationLogListener extends MetaStoreEventListener {
  private static final Logger LOG = LoggerFactory.getLogger(NotificationLogListener.class);
  /** The cleaner's period in seconds. */
  public static final String CLEANER_INTERVAL = "waggle.listener.cleaner.interval";
  /** One writer of NOTIFICATION_LOG at a time in this metastore, as DbNotificationListener does. */
  private static final Object LOG_LOCK = new Object();
  private static Cleaner cleaner;

  private final HiveConf conf;
  private final MessageFactory messages;

  public NotificationLogListener(Configuration config) throws MetaException {
    super(config);
    conf = config instanceof HiveConf ? (HiveConf) config : new HiveConf(config, NotificationLogListener.class);
    messages = MessageFactory.getInstance();
    startCleaner(conf);
  }

  private static synchronized void startCleaner(HiveConf conf) throws MetaException {
    if (cleaner == null) {
      RawStore store = RawStoreProxy.getProxy(conf, conf, conf.getVar(HiveConf.ConfVars.METASTORE_RAW_STORE_IMPL),
          999999);
      cleaner = new Cleaner(store, conf.getTimeVar(HiveConf.ConfVars.METASTORE_EVENT_DB_LISTENER_TTL,
          TimeUnit.SECONDS), conf.getLong(CLEANER_INTERVAL, 60L));
      cleaner.start();
    }
  }

  @Override
  public void onConfigChange(ConfigChangeEvent change) throws MetaException {
    String key = change.getKey();
    if (key.equals(HiveConf.ConfVars.METASTORE_EVENT_DB_LISTENER_TTL.varname)
        || key.equals(HiveConf.ConfVars.METASTORE_EVENT_DB_LISTENER_TTL.toString())) {
      conf.set(HiveConf.ConfVars.METASTORE_EVENT_DB_LISTENER_TTL.varname, change.getNewValue());
      cleaner.setTimeToLive(conf.getTimeVar(HiveConf.ConfVars.METASTORE_EVENT_DB_LISTENER_TTL, TimeUnit.SECONDS));
    }
  }

  // -- databases ---------------------------------------------------------------------------------------------
  @Override
  public void onCreateDatabase(CreateDatabaseEvent change) throws MetaException {
    Database db = change.getDatabase();
    record(MessageFactory.CREATE_DATABASE_EVENT, messages.buildCreateDatabaseMessage(db).toString(), db.getName(),
        null, change);
  }

  @Override
  public void onDropDatabase(DropDatabaseEvent change) throws MetaException {
    Database db = change.getDatabase();
    record(MessageFactory.DROP_DATABASE_EVENT, messages.buildDropDatabaseMessage(db).toString(), db.getName(),
        null, change);
  }

  // -- tables ------------------------------------------------------------------------------------------------
  @Override
  public void onCreateTable(CreateTableEvent change) throws MetaException {
    Table t = change.getTable();
    String location = t.getSd() == null ? null : t.getSd().getLocation();
    record(MessageFactory.CREATE_TABLE_EVENT, messages.buildCreateTableMessage(t, files(location).iterator())
        .toString(), t.getDbName(), t.getTableName(), change);
  }

  @Override
  public void onAlterTable(AlterTableEvent change) throws MetaException {
    Table before = change.getOldTable();
    Table after = change.getNewTable();
    // named by the table as it is after the change (a rename names the new table; the message has both)
    record(MessageFactory.ALTER_TABLE_EVENT, messages.buildAlterTableMessage(before, after).toString(),
        after.getDbName(), after.getTableName(), change);
  }

  @Override
  public void onDropTable(DropTableEvent change) throws MetaException {
    Table t = change.getTable();
    record(MessageFactory.DROP_TABLE_EVENT, messages.buildDropTableMessage(t).toString(), t.getDbName(),
        t.getTableName(), change);
  }

  // -- partitions --------------------------------------------------------------------------------------------
  @Override
  public void onAddPartition(AddPartitionEvent change) throws MetaException {
    Table t = change.getTable();
    List<PartitionFiles> files = new ArrayList<>();
    Iterator<Partition> parts = change.getPartitionIterator();
    while (parts.hasNext()) {
      Partition p = parts.next();
      String location = p.getSd() == null ? null : p.getSd().getLocation();
      files.add(new PartitionFiles(Warehouse.makePartName(t.getPartitionKeys(), p.getValues()),
          files(location).iterator()));
    }
    record(MessageFactory.ADD_PARTITION_EVENT, messages.buildAddPartitionMessage(t, change.getPartitionIterator(),
        files.iterator()).toString(), t.getDbName(), t.getTableName(), change);
  }

  @Override
  public void onAlterPartition(AlterPartitionEvent change) throws MetaException {
    Partition before = change.getOldPartition();
    Partition after = change.getNewPartition();
    record(MessageFactory.ALTER_PARTITION_EVENT, messages.buildAlterPartitionMessage(change.getTable(), before,
        after).toString(), before.getDbName(), before.getTableName(), change);
  }

  @Override
  public void onDropPartition(DropPartitionEvent change) throws MetaException {
    Table t = change.getTable();
    record(MessageFactory.DROP_PARTITION_EVENT, messages.buildDropPartitionMessage(t, change.getPartitionIterator())
        .toString(), t.getDbName(), t.getTableName(), change);
  }

  // -- data written (fire_listener_event), functions, indexes ------------------------------------------------------
  @Override
  public void onInsert(InsertEvent change) throws MetaException {
    List<String> files = new ArrayList<>();
    List<String> checksums = change.getFileChecksums();
    for (int i = 0; i < change.getFiles().size(); i++) {
      String checksum = checksums == null || checksums.size() <= i ? null : checksums.get(i);
      files.add(ReplChangeManager.encodeFileUri(change.getFiles().get(i), checksum));
    }
    record(MessageFactory.INSERT_EVENT, messages.buildInsertMessage(change.getDb(), change.getTable(),
        change.getPartitionKeyValues(), files.iterator()).toString(), change.getDb(), change.getTable(), change);
  }

  @Override
  public void onCreateFunction(CreateFunctionEvent change) throws MetaException {
    Function f = change.getFunction();
    record(MessageFactory.CREATE_FUNCTION_EVENT, messages.buildCreateFunctionMessage(f).toString(), f.getDbName(),
        null, change);
  }

  @Override
  public void onDropFunction(DropFunctionEvent change) throws MetaException {
    Function f = change.getFunction();
    record(MessageFactory.DROP_FUNCTION_EVENT, messages.buildDropFunctionMessage(f).toString(), f.getDbName(),
        null, change);
  }

  @Override
  public void onAddIndex(AddIndexEvent change) throws MetaException {
    Index i = change.getIndex();
    record(MessageFactory.CREATE_INDEX_EVENT, messages.buildCreateIndexMessage(i).toString(), i.getDbName(), null,
        change);
  }

  @Override
  public void onAlterIndex(AlterIndexEvent change) throws MetaException {
    Index i = change.getNewIndex();
    record(MessageFactory.ALTER_INDEX_EVENT, messages.buildAlterIndexMessage(change.getOldIndex(), i).toString(),
        i.getDbName(), null, change);
  }

  @Override
  public void onDropIndex(DropIndexEvent change) throws MetaException {
    Index i = change.getIndex();
    record(MessageFactory.DROP_INDEX_EVENT, messages.buildDropIndexMessage(i).toString(), i.getDbName(), null,
        change);
  }

  // -- writing ---------------------------------------------------------------------------------------------------
  private static int now() {
    return (int) (System.currentTimeMillis() / 1000);
  }

  /** Write one event with the change's RawStore (the handler thread's: the change's own transaction). */
  private void record(String type, String message, String db, String table, ListenerEvent change)
      throws MetaException {
    if (!change.getStatus()) {
      return;  // the change failed: nothing happened (only a non-transactional listener is told of failures)
    }
    NotificationEvent event = new NotificationEvent(0, now(), type, message);
    event.setMessageFormat(messages.getMessageFormat());
    event.setDbName(db);
    if (table != null) {
      event.setTableName(table);
    }
    synchronized (LOG_LOCK) {
      HMSHandler.getMSForConf(conf).addNotificationEvent(event);
    }
    if (event.isSetEventId()) {  // for the listeners after this one, as DbNotificationListener tells them
      change.putParameter(MetaStoreEventListenerConstants.DB_NOTIFICATION_EVENT_ID_KEY_NAME,
          Long.toString(event.getEventId()));
    }
  }

  /** The data files under a location, as {@code uri#checksum} (no checksum where the file system has none);
   * directories and hidden files (names starting with _ or .) are left out. */
  private List<String> files(String location) {
    List<String> out = new ArrayList<>();
    if (location == null) {
      return out;
    }
    try {
      Path path = new Path(location);
      FileSystem fs = path.getFileSystem(conf);
      if (!fs.exists(path)) {
        return out;
      }
      for (FileStatus file : fs.listStatus(path)) {
        String name = file.getPath().getName();
        if (file.isFile() && !name.startsWith("_") && !name.startsWith(".")) {
          out.add(ReplChangeManager.encodeFileUri(file.getPath().toString(),
              ReplChangeManager.getChksumString(file.getPath(), fs)));
        }
      }
    } catch (IOException e) {
      throw new RuntimeException("cannot list the files under " + location, e);
    }
    return out;
  }

  /** Deletes events older than the time to live, with a RawStore of its own. */
  private static final class Cleaner extends Thread {
    private final RawStore store;
    private volatile int ttlSeconds;
    private final long intervalMillis;

    Cleaner(RawStore store, long ttlSeconds, long intervalSeconds) {
      super("waggle-notification-log-cleaner");
      setDaemon(true);
      this.store = store;
      setTimeToLive(ttlSeconds);
      this.intervalMillis = Math.max(1L, intervalSeconds) * 1000L;
    }

    void setTimeToLive(long seconds) {
      ttlSeconds = (int) Math.min(Integer.MAX_VALUE, seconds);
    }

    @Override
    public void run() {
      while (true) {
        try {
          store.cleanNotificationEvents(ttlSeconds);
        } catch (Exception e) {
          LOG.error("cleaning the notification log failed; trying again in " + intervalMillis + " ms", e);
        }
        try {
          Thread.sleep(intervalMillis);
        } catch (InterruptedException e) {
          return;
        }
      }
    }
  }
}
