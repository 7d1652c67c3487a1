/*
 * Reads notification events the way Hive's own replication does: each stdin line is "TYPE<TAB>MESSAGE", decoded
 * with the metastore's MessageFactory deserializer (MessageDeserializer.get*Message, then checkValid()). Prints,
 * per line, one JSON object of what the message says: db, table, partitions, files, and the Thrift objects'
 * names and columns. Used by tests/integration/test_listener.py.
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.hadoop.hive.metastore.api.FieldSchema;
import org.apache.hadoop.hive.metastore.api.Partition;
import org.apache.hadoop.hive.metastore.api.Table;
import org.apache.hadoop.hive.metastore.messaging.AddPartitionMessage;
import org.apache.hadoop.hive.metastore.messaging.AlterPartitionMessage;
import org.apache.hadoop.hive.metastore.messaging.AlterTableMessage;
import org.apache.hadoop.hive.metastore.messaging.CreateFunctionMessage;
import org.apache.hadoop.hive.metastore.messaging.CreateTableMessage;
import org.apache.hadoop.hive.metastore.messaging.DropPartitionMessage;
import org.apache.hadoop.hive.metastore.messaging.DropTableMessage;
import org.apache.hadoop.hive.metastore.messaging.EventMessage;
import org.apache.hadoop.hive.metastore.messaging.InsertMessage;
import org.apache.hadoop.hive.metastore.messaging.MessageDeserializer;
import org.apache.hadoop.hive.metastore.messaging.MessageFactory;
import org.apache.hadoop.hive.metastore.messaging.PartitionFiles;

public class EventCheck {
  public static void main(String[] args) throws Exception {
    MessageDeserializer d = MessageFactory.getInstance().getDeserializer();
    ObjectMapper json = new ObjectMapper();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
    String line;
    while ((line = in.readLine()) != null) {
      String[] parts = line.split("\t", 2);
      Map<String, Object> out = new LinkedHashMap<>();
      out.put("type", parts[0]);
      EventMessage m = d.getEventMessage(parts[0], parts[1]).checkValid();
      out.put("db", m.getDB());
      out.put("event_type", m.getEventType().toString());
      switch (parts[0]) {
        case "CREATE_TABLE": {
          CreateTableMessage c = (CreateTableMessage) m;
          out.put("table", c.getTable());
          out.put("files", list(c.getFiles()));
          out.put("object", describe(c.getTableObj()));
          break;
        }
        case "ALTER_TABLE": {
          AlterTableMessage a = (AlterTableMessage) m;
          out.put("table", a.getTable());
          out.put("before", describe(a.getTableObjBefore()));
          out.put("after", describe(a.getTableObjAfter()));
          break;
        }
        case "DROP_TABLE":
          out.put("table", ((DropTableMessage) m).getTable());
          break;
        case "ADD_PARTITION": {
          AddPartitionMessage a = (AddPartitionMessage) m;
          out.put("table", a.getTable());
          out.put("partitions", a.getPartitions());
          List<Object> locations = new ArrayList<>();
          for (Partition p : a.getPartitionObjs()) {
            locations.add(p.getSd().getLocation());
          }
          out.put("locations", locations);
          Map<String, Object> files = new LinkedHashMap<>();
          for (PartitionFiles f : a.getPartitionFilesIter()) {
            files.put(f.getPartitionName(), list(f.getFiles()));
          }
          out.put("files", files);
          break;
        }
        case "ALTER_PARTITION": {
          AlterPartitionMessage a = (AlterPartitionMessage) m;
          out.put("table", a.getTable());
          out.put("partition", a.getKeyValues());
          out.put("location_before", a.getPtnObjBefore().getSd().getLocation());
          out.put("location_after", a.getPtnObjAfter().getSd().getLocation());
          break;
        }
        case "DROP_PARTITION": {
          DropPartitionMessage p = (DropPartitionMessage) m;
          out.put("table", p.getTable());
          out.put("partitions", p.getPartitions());
          break;
        }
        case "INSERT": {
          InsertMessage i = (InsertMessage) m;
          out.put("table", i.getTable());
          out.put("partition", i.getPartitionKeyValues());
          out.put("files", list(i.getFiles()));
          break;
        }
        case "CREATE_FUNCTION":
          out.put("function", ((CreateFunctionMessage) m).getFunctionObj().getFunctionName());
          break;
        default:
          break;
      }
      System.out.println(json.writeValueAsString(out));
    }
  }

  private static List<String> list(Iterable<String> items) {
    List<String> out = new ArrayList<>();
    if (items != null) {
      for (String s : items) {
        out.add(s);
      }
    }
    return out;
  }

  private static Map<String, Object> describe(Table t) {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("db", t.getDbName());
    out.put("name", t.getTableName());
    List<String> cols = new ArrayList<>();
    for (FieldSchema f : t.getSd().getCols()) {
      cols.add(f.getName() + ":" + f.getType());
    }
    out.put("columns", cols);
    out.put("location", t.getSd().getLocation());
    return out;
  }
}
