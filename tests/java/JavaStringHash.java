// The oracle for pycanal.mq._java.string_hash: Java's own String.hashCode.
// stdin: one string per line as hex UTF-16 code units (4 digits each, so lone surrogates survive);
// stdout: its hashCode() per line. Run as `java JavaStringHash.java` (single-file source launch).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

public class JavaStringHash {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null; ) {
            char[] units = new char[line.length() / 4];
            for (int i = 0; i < units.length; i++) {
                units[i] = (char) Integer.parseInt(line.substring(4 * i, 4 * i + 4), 16);
            }
            out.append(new String(units).hashCode()).append('\n');
        }
        System.out.print(out);
    }
}
