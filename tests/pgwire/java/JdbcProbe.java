// pgjdbc against dpsql's PostgreSQL door: java -cp postgresql.jar JdbcProbe.java URL USER KEY
// Prints one "key value" line per check; tests/pgwire/test_jdbc.py asserts on them.
import java.sql.*;

public class JdbcProbe {
  static void p(String key, Object value) { System.out.println(key + " " + value); }

  public static void main(String[] args) throws Exception {
    try (Connection c = DriverManager.getConnection(args[0], args[1], args[2])) {
      DatabaseMetaData md = c.getMetaData();
      p("product", md.getDatabaseProductName() + " " + md.getDatabaseProductVersion());
      try (ResultSet r = md.getSchemas()) { while (r.next()) p("schema", r.getString("TABLE_SCHEM")); }
      try (ResultSet r = md.getTables(null, null, "%", new String[] {"TABLE", "VIEW"})) {
        while (r.next()) p("table", r.getString("TABLE_SCHEM") + "." + r.getString("TABLE_NAME") + ":" + r.getString("TABLE_TYPE"));
      }
      try (ResultSet r = md.getColumns(null, "public", "prompts", "%")) {
        while (r.next()) p("column", r.getString("COLUMN_NAME") + ":" + r.getInt("DATA_TYPE") + ":" + r.getString("TYPE_NAME"));
      }
      try (ResultSet r = md.getPrimaryKeys(null, "public", "prompts")) { int n = 0; while (r.next()) n++; p("primary_keys", n); }
      try (ResultSet r = md.getTypeInfo()) { int n = 0; while (r.next()) n++; p("type_info", n); }
      try (Statement s = c.createStatement();
           ResultSet r = s.executeQuery("SELECT region, COUNT(*) AS n FROM users GROUP BY region")) {
        ResultSetMetaData meta = r.getMetaData();
        p("query_types", meta.getColumnTypeName(1) + "," + meta.getColumnTypeName(2));
        while (r.next()) p("row", r.getString(1) + "=" + r.getLong(2));
      }
      try (PreparedStatement ps = c.prepareStatement(
               "SELECT COUNT(*) AS n FROM prompts WHERE model = ? AND tokens_in > ?")) {
        for (int i = 0; i < 7; i++) {  // pgjdbc switches to a named server statement at 5
          ps.setString(1, "small");
          ps.setInt(2, 100);
          try (ResultSet r = ps.executeQuery()) { r.next(); p("prepared", r.getLong(1)); }
        }
      }
      c.setAutoCommit(false);
      try (Statement s = c.createStatement()) {
        s.setFetchSize(1);  // a portal with a row limit of 1
        try (ResultSet r = s.executeQuery("SELECT plan, COUNT(*) AS n FROM users GROUP BY plan")) {
          int n = 0; while (r.next()) n++; p("fetched", n);
        }
      }
      c.rollback();
      c.setAutoCommit(true);
      try (Statement s = c.createStatement()) {
        s.executeQuery("SELECT user_id FROM users");
        p("refusal", "none");
      } catch (SQLException e) {
        p("refusal", e.getSQLState());
      }
    }
  }
}
