// Prints String.hashCode() and Math.abs(hashCode % n) for each UTF-8 line of stdin: the reference
// the hash selector must match (run by tests/producer/test_selectors.py with the JDK on the machine).
import java.io.*; import java.nio.charset.StandardCharsets;
public class Hash { public static void main(String[] a) throws Exception {
  int n = Integer.parseInt(a[0]);
  BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
  String line; while ((line = r.readLine()) != null) { System.out.println(line.hashCode() + " " + Math.abs(line.hashCode() % n)); } } }
