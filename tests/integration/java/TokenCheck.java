// Reads and writes Hive delegation tokens with Hadoop's and Hive's own classes, for waggle's compatibility test.
//   read  <token> <keyId> <keyHex>   print the token's fields; verify and renew it with Hive's secret manager
//   write <owner> <renewer> <realUser> <issueMs> <maxMs> <sequence> <keyId> <keyHex> <service>
//         print a token string whose password Hive's secret manager computed
//   sasl-client <username> <password>   Java's DIGEST-MD5 client as Hive's token client sets it up, over hex lines
//   sasl-server <username> <password>   Java's DIGEST-MD5 server as Hive's metastore sets it up, over hex lines
//   short <rules> <principal>...        each principal's auth_to_local short name, or "!" if none
import java.io.ByteArrayInputStream;
import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.InputStreamReader;
import java.util.HashMap;
import java.util.Map;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.CallbackHandler;
import javax.security.auth.callback.NameCallback;
import javax.security.auth.callback.PasswordCallback;
import javax.security.sasl.AuthorizeCallback;
import javax.security.sasl.RealmCallback;
import javax.security.sasl.Sasl;
import javax.security.sasl.SaslClient;
import javax.security.sasl.SaslServer;
import org.apache.hadoop.hive.thrift.DelegationTokenIdentifier;
import org.apache.hadoop.hive.thrift.DelegationTokenSecretManager;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.security.token.Token;
import org.apache.hadoop.security.token.delegation.DelegationKey;

public class TokenCheck {
    static final long DAY = 24L * 3600 * 1000;

    static String hex(byte[] bytes) {
        StringBuilder out = new StringBuilder();
        for (byte b : bytes) out.append(String.format("%02x", b & 0xff));
        return out.toString();
    }

    static byte[] unhex(String text) {
        byte[] out = new byte[text.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(text.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    static DelegationTokenSecretManager manager(int keyId, String keyHex) throws Exception {
        DelegationTokenSecretManager m = new DelegationTokenSecretManager(DAY, 7 * DAY, DAY, 3600 * 1000L);
        m.addKey(new DelegationKey(keyId, Long.MAX_VALUE, DelegationTokenSecretManager.createSecretKey(unhex(keyHex))));
        return m;
    }

    static CallbackHandler handler(String user, String password) {
        return callbacks -> {
            for (Callback c : callbacks) {
                if (c instanceof NameCallback) ((NameCallback) c).setName(user);
                else if (c instanceof PasswordCallback) ((PasswordCallback) c).setPassword(password.toCharArray());
                else if (c instanceof RealmCallback) ((RealmCallback) c).setText(((RealmCallback) c).getDefaultText());
                else if (c instanceof AuthorizeCallback) {
                    AuthorizeCallback a = (AuthorizeCallback) c;
                    a.setAuthorized(a.getAuthenticationID().equals(a.getAuthorizationID()));
                    if (a.isAuthorized()) a.setAuthorizedID(a.getAuthorizationID());
                }
            }
        };
    }

    static void sasl(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        Map<String, String> props = new HashMap<>();
        props.put(Sasl.QOP, "auth");
        if (args[0].equals("sasl-client")) {
            SaslClient client = Sasl.createSaslClient(
                new String[] {"DIGEST-MD5"}, null, null, "default", props, handler(args[1], args[2]));
            System.out.println(hex(client.evaluateChallenge(unhex(in.readLine()))));
            System.out.flush();
            client.evaluateChallenge(unhex(in.readLine()));
            System.out.println("complete=" + client.isComplete());
        } else {
            SaslServer server = Sasl.createSaslServer("DIGEST-MD5", null, "default", props, handler(args[1], args[2]));
            System.out.println(hex(server.evaluateResponse(new byte[0])));
            System.out.flush();
            System.out.println(hex(server.evaluateResponse(unhex(in.readLine()))));
            System.out.println("user=" + server.getAuthorizationID());
        }
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("short")) {
            org.apache.hadoop.security.authentication.util.KerberosName.setRules(args[1]);
            for (int i = 2; i < args.length; i++) {
                String name;
                try {
                    name = new org.apache.hadoop.security.authentication.util.KerberosName(args[i]).getShortName();
                } catch (Exception e) {
                    name = "!";
                }
                System.out.println(name);
            }
            return;
        }
        if (args[0].startsWith("sasl-")) {
            sasl(args);
            return;
        }
        // owners are principals; map them to their first component, as a cluster's auth_to_local would
        org.apache.hadoop.security.authentication.util.KerberosName.setRules("RULE:[1:$1]\nRULE:[2:$1]\nDEFAULT");
        if (args[0].equals("read")) {
            Token<DelegationTokenIdentifier> token = new Token<>();
            token.decodeFromUrlString(args[1]);
            DelegationTokenIdentifier id = new DelegationTokenIdentifier();
            id.readFields(new DataInputStream(new ByteArrayInputStream(token.getIdentifier())));
            System.out.println("kind=" + token.getKind());
            System.out.println("service=" + token.getService());
            System.out.println("owner=" + id.getOwner());
            System.out.println("renewer=" + id.getRenewer());
            System.out.println("realUser=" + id.getRealUser());
            System.out.println("issueDate=" + id.getIssueDate());
            System.out.println("maxDate=" + id.getMaxDate());
            System.out.println("sequence=" + id.getSequenceNumber());
            System.out.println("masterKeyId=" + id.getMasterKeyId());
            System.out.println("password=" + hex(token.getPassword()));
            System.out.println("reserialized=" + hex(id.getBytes()).equals(hex(token.getIdentifier())));
            DelegationTokenSecretManager m = manager(Integer.parseInt(args[2]), args[3]);
            m.addPersistedDelegationToken(id, Long.MAX_VALUE);
            m.verifyToken(id, token.getPassword());
            System.out.println("verified=true");
            System.out.println("renewed=" + m.renewToken(token, id.getRenewer().toString()));
        } else {
            DelegationTokenIdentifier id = new DelegationTokenIdentifier(new Text(args[1]), new Text(args[2]), new Text(args[3]));
            id.setIssueDate(Long.parseLong(args[4]));
            id.setMaxDate(Long.parseLong(args[5]));
            id.setSequenceNumber(Integer.parseInt(args[6]));
            id.setMasterKeyId(Integer.parseInt(args[7]));
            DelegationTokenSecretManager m = manager(Integer.parseInt(args[7]), args[8]);
            m.addPersistedDelegationToken(id, Long.MAX_VALUE);
            byte[] password = m.retrievePassword(id);
            Token<DelegationTokenIdentifier> token = new Token<>(id.getBytes(), password, id.getKind(), new Text(args[9]));
            System.out.println(token.encodeToUrlString());
        }
    }
}
