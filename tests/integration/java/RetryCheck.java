// Hive 2.3's own metastore client behind a rate limit of waggle: the client is made as Hive makes it (a
// RetryingMetaStoreClient proxy over HiveMetaStoreClient), then asked for one database several times in a row.
//   RetryCheck <thrift-uri> <database> <calls> <retries>
// prints "calls=<n> ms=<elapsed>" when every call succeeded (a refused one was retried by the proxy), or exits 1.
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.IMetaStoreClient;
import org.apache.hadoop.hive.metastore.RetryingMetaStoreClient;

public class RetryCheck {
    public static void main(String[] args) throws Exception {
        HiveConf conf = new HiveConf();
        conf.setVar(HiveConf.ConfVars.METASTOREURIS, args[0]);
        conf.setIntVar(HiveConf.ConfVars.METASTORETHRIFTFAILURERETRIES, Integer.parseInt(args[3]));
        conf.set("hive.metastore.client.connect.retry.delay", "1s");
        IMetaStoreClient client = RetryingMetaStoreClient.getProxy(conf, true);
        int calls = Integer.parseInt(args[2]);
        long started = System.nanoTime();
        try {
            for (int i = 0; i < calls; i++) {
                client.getDatabase(args[1]);
            }
        } finally {
            client.close();
        }
        System.out.println("calls=" + calls + " ms=" + (System.nanoTime() - started) / 1000000);
    }
}
