/*
 * Reads a metastore's notification log with Hive 2.3's own metastore client, as Hive's consumers do (replication,
 * HCatalog's listeners): HiveMetaStoreClient.getCurrentNotificationEventId(), then
 * getNextNotification(lastEvent, maxEvents, filter) with a NotificationFilter keeping the events whose table name
 * starts with a prefix. Each message is decoded with MessageFactory.getInstance().getDeserializer().
 *   MergedLogCheck <thrift-uri> <lastEvent> <maxEvents> <table-prefix>
 * prints {"current": <id>} and then one JSON object per event kept: id, type, db, table (the event's own), and
 * what the deserializer reads: message_db, message_table, and the Thrift objects' database names (object_db for
 * CREATE_TABLE, before_db/after_db for ALTER_TABLE, partition_dbs for ADD_PARTITION), files for INSERT.
 * Used by tests/integration/test_merged_log_clients.py.
 */

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStoreClient;
import org.apache.hadoop.hive.metastore.IMetaStoreClient;
import org.apache.hadoop.hive.metastore.api.NotificationEvent;
import org.apache.hadoop.hive.metastore.api.NotificationEventResponse;
import org.apache.hadoop.hive.metastore.api.Partition;
import org.apache.hadoop.hive.metastore.messaging.AddPartitionMessage;
import org.apache.hadoop.hive.metastore.messaging.AlterTableMessage;
import org.apache.hadoop.hive.metastore.messaging.CreateTableMessage;
import org.apache.hadoop.hive.metastore.messaging.DropTableMessage;
import org.apache.hadoop.hive.metastore.messaging.EventMessage;
import org.apache.hadoop.hive.metastore.messaging.InsertMessage;
import org.apache.hadoop.hive.metastore.messaging.MessageDeserializer;
import org.apache.hadoop.hive.metastore.messaging.MessageFactory;

public class MergedLogCheck {
  public static void main(String[] args) throws Exception {
    HiveConf conf = new HiveConf();
    conf.setVar(HiveConf.ConfVars.METASTOREURIS, args[0]);
    conf.setIntVar(HiveConf.ConfVars.METASTORETHRIFTCONNECTIONRETRIES, 1);
    long lastEvent = Long.parseLong(args[1]);
    int maxEvents = Integer.parseInt(args[2]);
    final String prefix = args[3];
    ObjectMapper json = new ObjectMapper();
    MessageDeserializer d = MessageFactory.getInstance().getDeserializer();
    IMetaStoreClient client = new HiveMetaStoreClient(conf);
    try {
      Map<String, Object> head = new LinkedHashMap<>();
      head.put("current", client.getCurrentNotificationEventId().getEventId());
      System.out.println(json.writeValueAsString(head));
      IMetaStoreClient.NotificationFilter filter = new IMetaStoreClient.NotificationFilter() {
        @Override
        public boolean accept(NotificationEvent event) {
          return event.getTableName() != null && event.getTableName().startsWith(prefix);
        }
      };
      NotificationEventResponse response = client.getNextNotification(lastEvent, maxEvents, filter);
      for (NotificationEvent e : response.getEvents()) {
        System.out.println(json.writeValueAsString(describe(d, e)));
      }
    } finally {
      client.close();
    }
  }

  private static Map<String, Object> describe(MessageDeserializer d, NotificationEvent e) throws Exception {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("id", e.getEventId());
    out.put("type", e.getEventType());
    out.put("db", e.getDbName());
    out.put("table", e.getTableName());
    EventMessage m = d.getEventMessage(e.getEventType(), e.getMessage()).checkValid();
    out.put("message_db", m.getDB());
    switch (e.getEventType()) {
      case "CREATE_TABLE": {
        CreateTableMessage c = (CreateTableMessage) m;
        out.put("message_table", c.getTable());
        out.put("object_db", c.getTableObj().getDbName());
        out.put("object_table", c.getTableObj().getTableName());
        break;
      }
      case "ALTER_TABLE": {
        AlterTableMessage a = (AlterTableMessage) m;
        out.put("message_table", a.getTable());
        out.put("before_db", a.getTableObjBefore().getDbName());
        out.put("after_db", a.getTableObjAfter().getDbName());
        out.put("after_table", a.getTableObjAfter().getTableName());
        break;
      }
      case "ADD_PARTITION": {
        AddPartitionMessage a = (AddPartitionMessage) m;
        out.put("message_table", a.getTable());
        List<String> dbs = new ArrayList<>();
        for (Partition p : a.getPartitionObjs()) {
          dbs.add(p.getDbName());
        }
        out.put("partition_dbs", dbs);
        out.put("partitions", a.getPartitions());
        break;
      }
      case "INSERT": {
        InsertMessage i = (InsertMessage) m;
        out.put("message_table", i.getTable());
        out.put("partition", i.getPartitionKeyValues());
        List<String> files = new ArrayList<>();
        for (String f : i.getFiles()) {
          files.add(f);
        }
        out.put("files", files);
        break;
      }
      case "DROP_TABLE":
        out.put("message_table", ((DropTableMessage) m).getTable());
        break;
      default:
        break;
    }
    return out;
  }
}
