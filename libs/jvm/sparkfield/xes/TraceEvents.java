package sparkfield.xes;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;

/**
 * One XES trace record (the text after {@code <trace}) of the common shape read in the JVM:
 * the rows of {@code sparkfield.process.eventlog.xes_fast.trace_events}, whose grammar and rules
 * this class follows character for character, or null for any other record (the Python reader
 * then reads the log).
 *
 * <p>The shape: XML white space, {@code >}, then typed attributes ({@code <string key="..."
 * value="..."/>} and the other XES types, key and value in either order, double-quoted) and
 * {@code <event>} elements holding only such attributes, then {@code </trace>}. Values hold no
 * {@code "}, {@code <}, {@code &}, control characters (tab and line breaks included), U+FFFE or
 * U+FFFF. The case is the trace's first {@code concept:name}; in an event a later key wins, in
 * the place where the key first appears.
 *
 * <p>The result: {@code struct<case: string, events: array<struct<activity, time, resource,
 * lifecycle: string, attributes: map<string, string>, instant: bigint>>>}; {@code instant} is
 * the microseconds since the epoch of a time written in strict ISO-8601 with an offset (the rules
 * of {@code sparkfield.process.eventlog.iso_instants}), null for any other time.
 */
public final class TraceEvents implements UDF1<String, Row> {
  private static final long serialVersionUID = 1L;

  public static final String RETURN_TYPE =
      "struct<case: string, events: array<struct<activity: string, time: string, "
          + "resource: string, lifecycle: string, attributes: map<string, string>, "
          + "instant: bigint>>>";

  private static final String[] SLOTS = {
    "concept:name", "time:timestamp", "org:resource", "lifecycle:transition"
  };
  private static final String[] TYPES = {"string", "date", "int", "float", "boolean", "id"};
  // the log's end tag at the end of the record (Python's \w and \s: Unicode classes)
  private static final Pattern LOG_CLOSE =
      Pattern.compile("</(?:[\\w.-]+:)?log>\\s*$", Pattern.UNICODE_CHARACTER_CLASS);
  private static final int[] DAYS_IN_MONTH = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  private static final int MAX_OFFSET_MINUTES = 14 * 60;

  @Override
  public Row call(String record) {
    if (record == null) {
      return null;
    }
    // the log's end tag is cut where the Python reader cuts it (a record holding "</log")
    return new Scanner(record.contains("</log")
        ? LOG_CLOSE.matcher(record).replaceFirst("") : record).parse();
  }

  private static Row eventRow(Map<String, String> event) {
    Object[] fields = new Object[6];
    for (int k = 0; k < SLOTS.length; k++) {
      fields[k] = event.remove(SLOTS[k]);
    }
    fields[4] = event.isEmpty() ? null : event;
    fields[5] = instant((String) fields[1]);
    return RowFactory.create(fields);
  }

  private static boolean isWs(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
  }

  /** One record being read. */
  private static final class Scanner {
    private final String s;
    private final int n;
    private String key;
    private String value;

    Scanner(String s) {
      this.s = s;
      this.n = s.length();
    }

  Row parse() {
    int i = skipWs(0);
    if (i >= n || s.charAt(i) != '>') {
      return null;
    }
    i++;
    String name = null;
    List<Row> events = new ArrayList<>();
    while (true) {
      i = skipWs(i);
      if (s.startsWith("</trace>", i)) {
        return skipWs(i + 8) == n && name != null ? RowFactory.create(name, events) : null;
      }
      if (s.startsWith("<event>", i)) {
        i += 7;
        Map<String, String> event = new LinkedHashMap<>();
        while (true) {
          i = skipWs(i);
          if (s.startsWith("</event>", i)) {
            i += 8;
            break;
          }
          i = attribute(i);
          if (i < 0) {
            return null;
          }
          event.put(key, value);
        }
        events.add(eventRow(event));
        continue;
      }
      i = attribute(i);
      if (i < 0) {
        return null;
      }
      if (name == null && key.equals("concept:name")) {
        name = value;
      }
    }
  }

  private int skipWs(int i) {
    while (i < n && isWs(s.charAt(i))) {
      i++;
    }
    return i;
  }

  /**
   * The attribute that starts at {@code i} (its {@code <}): sets {@link #key} and {@link
   * #value} and gives the index after it, or -1 where none of the shape starts.
   */
  private int attribute(int i) {
    if (i >= n || s.charAt(i) != '<') {
      return -1;
    }
    int j = i + 1;
    while (j < n && s.charAt(j) >= 'a' && s.charAt(j) <= 'z') {
      j++;
    }
    if (!isType(i + 1, j) || j >= n || !isWs(s.charAt(j))) {
      return -1;
    }
    j = skipWs(j);
    boolean keyFirst = s.startsWith("key=\"", j);
    if (!keyFirst && !s.startsWith("value=\"", j)) {
      return -1;
    }
    j += keyFirst ? 5 : 7;
    int end = valueEnd(j);
    if (end < 0 || end + 1 >= n || !isWs(s.charAt(end + 1))) {
      return -1;
    }
    String first = s.substring(j, end);
    j = skipWs(end + 1);
    String second = keyFirst ? "value=\"" : "key=\"";
    if (!s.startsWith(second, j)) {
      return -1;
    }
    j += second.length();
    end = valueEnd(j);
    if (end < 0) {
      return -1;
    }
    String other = s.substring(j, end);
    j = skipWs(end + 1);
    if (!s.startsWith("/>", j)) {
      return -1;
    }
    key = keyFirst ? first : other;
    value = keyFirst ? other : first;
    return j + 2;
  }

  private boolean isType(int from, int to) {
    for (String t : TYPES) {
      if (t.length() == to - from && s.startsWith(t, from)) {
        return true;
      }
    }
    return false;
  }

  /** Where the value that starts at {@code i} ends (its closing quote), or -1. */
  private int valueEnd(int i) {
    for (; i < n; i++) {
      char c = s.charAt(i);
      if (c == '"') {
        return i;
      }
      if (c < 0x20 || c == '<' || c == '&' || c == '\uFFFE' || c == '\uFFFF') {
        return -1;
      }
    }
    return -1;
  }

  }

  /** Microseconds since the epoch of a strict ISO-8601 time with an offset, or null. */
  static Long instant(String t) {
    if (t == null || t.length() < 20) {
      return null;
    }
    int len = t.length();
    for (int k = 0; k < 19; k++) {
      char c = t.charAt(k);
      char want = k == 4 || k == 7 ? '-' : k == 10 ? 'T' : k == 13 || k == 16 ? ':' : '0';
      if (want == '0' ? !isDigit(c) : c != want) {
        return null;
      }
    }
    int k = 19;
    long fraction = 0;
    if (t.charAt(k) == '.') {
      int from = ++k;
      while (k < len && isDigit(t.charAt(k))) {
        k++;
      }
      int digits = k - from;
      if (digits < 1 || digits > 6) {
        return null;
      }
      fraction = number(t, from, digits);
      for (int d = digits; d < 6; d++) {
        fraction *= 10;
      }
    }
    long offset = 0; // minutes east of UTC
    if (k == len - 1 && t.charAt(k) == 'Z') {
      offset = 0;
    } else if (k == len - 6 && (t.charAt(k) == '+' || t.charAt(k) == '-')
        && isDigit(t.charAt(k + 1)) && isDigit(t.charAt(k + 2)) && t.charAt(k + 3) == ':'
        && isDigit(t.charAt(k + 4)) && isDigit(t.charAt(k + 5))) {
      long oh = number(t, k + 1, 2);
      long om = number(t, k + 4, 2);
      if (om >= 60 || oh * 60 + om > MAX_OFFSET_MINUTES) {
        return null;
      }
      offset = (t.charAt(k) == '-' ? -1 : 1) * (oh * 60 + om);
    } else {
      return null;
    }
    long year = number(t, 0, 4);
    long month = number(t, 5, 2);
    long day = number(t, 8, 2);
    long hour = number(t, 11, 2);
    long minute = number(t, 14, 2);
    long second = number(t, 17, 2);
    if (year < 1 || month < 1 || month > 12 || day < 1 || hour >= 24 || minute >= 60
        || second >= 60) {
      return null;
    }
    boolean leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    if (day > DAYS_IN_MONTH[(int) month] + (month == 2 && leap ? 1 : 0)) {
      return null;
    }
    long seconds = daysFromCivil(year, month, day) * 86_400 + hour * 3_600 + minute * 60
        + second - offset * 60;
    return seconds * 1_000_000 + fraction;
  }

  private static boolean isDigit(char c) {
    return c >= '0' && c <= '9';
  }

  private static long number(String t, int from, int digits) {
    long v = 0;
    for (int k = from; k < from + digits; k++) {
      v = v * 10 + (t.charAt(k) - '0');
    }
    return v;
  }

  /** Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
  private static long daysFromCivil(long year, long month, long day) {
    long y = year - (month <= 2 ? 1 : 0);
    long era = Math.floorDiv(y, 400);
    long yoe = y - era * 400;
    long mp = (month + 9) % 12;
    long doy = (153 * mp + 2) / 5 + day - 1;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146_097 + doe - 719_468;
  }
}
