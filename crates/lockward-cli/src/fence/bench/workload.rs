//! The statements `lockward fence bench` times, on PostgreSQL or MySQL:
//! a bulk INSERT, a one-row UPDATE loop and a round trip, on one
//! connection that carries the bench lock's fence.

use std::time::{Duration, Instant};

/// One connection to the benched database.
pub enum Workload {
    #[cfg(feature = "postgres")]
    Postgres(tokio_postgres::Client),
    #[cfg(feature = "mysql")]
    Mysql {
        conn: mysql_async::Conn,
        /// MariaDB makes its rows with its sequence engine, MySQL with a
        /// recursive CTE.
        mariadb: bool,
    },
}

impl Workload {
    /// Connects as the URL says.
    pub async fn connect(url: &str) -> Result<Workload, String> {
        match lockward::StoreUrl::parse(url).map_err(|e| e.to_string())? {
            #[cfg(feature = "postgres")]
            lockward::StoreUrl::Postgres(pg) => Ok(Workload::Postgres(
                crate::demo::for_update::connect(&pg).await?,
            )),
            #[cfg(feature = "mysql")]
            lockward::StoreUrl::Mysql(my) => {
                use mysql_async::prelude::Queryable;
                let mut conn = crate::demo::for_update::connect_mysql(&my).await?;
                let version: Option<String> = conn
                    .query_first("SELECT VERSION()")
                    .await
                    .map_err(|e| e.to_string())?;
                if !version.as_deref().unwrap_or_default().contains("MariaDB") {
                    conn.query_drop("SET SESSION cte_max_recursion_depth = 4294967295")
                        .await
                        .map_err(|e| e.to_string())?;
                }
                Ok(Workload::Mysql {
                    conn,
                    mariadb: version.unwrap_or_default().contains("MariaDB"),
                })
            }
            other => Err(format!("{} cannot guard tables", other.scheme())),
        }
    }

    /// Runs statements without parameters.
    async fn batch(&mut self, sql: &str) -> Result<(), String> {
        match self {
            #[cfg(feature = "postgres")]
            Workload::Postgres(c) => c.batch_execute(sql).await.map_err(|e| e.to_string()),
            #[cfg(feature = "mysql")]
            Workload::Mysql { conn, .. } => {
                use mysql_async::prelude::Queryable;
                conn.query_drop(sql).await.map_err(|e| e.to_string())
            }
        }
    }

    /// Creates `tables` afresh: `(k int PRIMARY KEY, v bigint)`.
    pub async fn create(&mut self, tables: &[&str]) -> Result<(), String> {
        self.drop_tables(tables).await;
        for t in tables {
            self.batch(&format!("CREATE TABLE {t} (k int PRIMARY KEY, v bigint)"))
                .await?;
        }
        Ok(())
    }

    /// Drops `tables`, errors ignored (the bench is ending).
    pub async fn drop_tables(&mut self, tables: &[&str]) {
        let _ = self
            .batch(&format!("DROP TABLE IF EXISTS {}", tables.join(", ")))
            .await;
    }

    /// Makes the connection's writes carry `fence` for `lock`.
    pub async fn carry(&mut self, lock: &str, fence: u64) -> Result<(), String> {
        let set = match self {
            #[cfg(feature = "postgres")]
            Workload::Postgres(_) => {
                let (_, value) = lockward::fence::postgres::set_fences_statement(&[(lock, fence)]);
                format!("SET lockward.fences = '{value}'")
            }
            #[cfg(feature = "mysql")]
            Workload::Mysql { .. } => lockward::fence::mysql::init_command(&[(lock, fence)]),
        };
        self.batch(&set).await
    }

    /// One INSERT of `rows` rows into an emptied `table`.
    pub async fn insert(&mut self, table: &str, rows: u32) -> Result<Duration, String> {
        self.batch(&format!("TRUNCATE {table}")).await?;
        let sql = match self {
            #[cfg(feature = "postgres")]
            Workload::Postgres(_) => {
                format!("INSERT INTO {table} SELECT g, g FROM generate_series(1, {rows}) g")
            }
            #[cfg(feature = "mysql")]
            Workload::Mysql { mariadb: true, .. } => {
                format!("INSERT INTO {table} SELECT seq, seq FROM seq_1_to_{rows}")
            }
            #[cfg(feature = "mysql")]
            Workload::Mysql { mariadb: false, .. } => format!(
                "INSERT INTO {table} WITH RECURSIVE g(n) AS \
                 (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {rows}) SELECT n, n FROM g"
            ),
        };
        let began = Instant::now();
        self.batch(&sql).await?;
        Ok(began.elapsed())
    }

    /// One-row UPDATEs of `table` per second, each its own transaction.
    pub async fn update_rate(&mut self, table: &str, duration: Duration) -> Result<f64, String> {
        let sql = format!("UPDATE {table} SET v = v + 1 WHERE k = 1");
        let began = Instant::now();
        let mut done = 0u64;
        match self {
            #[cfg(feature = "postgres")]
            Workload::Postgres(c) => {
                let statement = c.prepare(&sql).await.map_err(|e| e.to_string())?;
                while began.elapsed() < duration {
                    c.execute(&statement, &[])
                        .await
                        .map_err(|e| e.to_string())?;
                    done += 1;
                }
            }
            #[cfg(feature = "mysql")]
            Workload::Mysql { conn: c, .. } => {
                use mysql_async::prelude::Queryable;
                let statement = c.prep(&sql).await.map_err(|e| e.to_string())?;
                while began.elapsed() < duration {
                    c.exec_drop(&statement, ())
                        .await
                        .map_err(|e| e.to_string())?;
                    done += 1;
                }
            }
        }
        Ok(done as f64 / began.elapsed().as_secs_f64())
    }

    /// One `SELECT 1`.
    pub async fn round_trip(&mut self) -> Result<Duration, String> {
        let began = Instant::now();
        match self {
            #[cfg(feature = "postgres")]
            Workload::Postgres(c) => {
                c.query_one("SELECT 1", &[])
                    .await
                    .map_err(|e| e.to_string())?;
            }
            #[cfg(feature = "mysql")]
            Workload::Mysql { conn: c, .. } => {
                use mysql_async::prelude::Queryable;
                c.query_drop("SELECT 1").await.map_err(|e| e.to_string())?;
            }
        }
        Ok(began.elapsed())
    }
}
