// Prints, for every ThriftHiveMetastore method in a hive-metastore jar, the exceptions its result struct declares:
//   <method> <field id>:<exception class> ...
// read from the generated classes' own metadata (metaDataMap), so nothing is guessed from source text.
// Run with the jar and its libthrift on the class path: java -cp JAR:LIBTHRIFT ResultFields.java JAR
import java.util.Enumeration;
import java.util.Map;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;

public class ResultFields {
    private static final String PREFIX = "org/apache/hadoop/hive/metastore/api/ThriftHiveMetastore$";
    private static final String SUFFIX = "_result.class";

    public static void main(String[] args) throws Exception {
        try (JarFile jar = new JarFile(args[0])) {
            for (Enumeration<JarEntry> entries = jar.entries(); entries.hasMoreElements();) {
                String path = entries.nextElement().getName();
                if (!path.startsWith(PREFIX) || !path.endsWith(SUFFIX)) {
                    continue;
                }
                String method = path.substring(PREFIX.length(), path.length() - SUFFIX.length());
                if (method.contains("$")) {
                    continue; // the schemes and field enums nested in a result class
                }
                Class<?> result = Class.forName(path.substring(0, path.length() - ".class".length()).replace('/', '.'));
                StringBuilder line = new StringBuilder(method);
                for (Map.Entry<?, ?> field : ((Map<?, ?>) result.getField("metaDataMap").get(null)).entrySet()) {
                    Object key = field.getKey();
                    short id = (Short) key.getClass().getMethod("getThriftFieldId").invoke(key);
                    if (id <= 0) {
                        continue; // success
                    }
                    Object meta = field.getValue().getClass().getField("valueMetaData").get(field.getValue());
                    Class<?> type = (Class<?>) meta.getClass().getField("structClass").get(meta);
                    line.append(' ').append(id).append(':').append(type.getSimpleName());
                }
                System.out.println(line);
            }
        }
    }
}
