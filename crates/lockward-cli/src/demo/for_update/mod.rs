//! The inventory scenario's `SELECT … FOR UPDATE` variant, when the store is
//! a database (PostgreSQL, MySQL or MariaDB): the stock is a row, and each
//! buyer locks it in a transaction (the database's own answer, shown beside
//! lockward's).

#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;

#[cfg(feature = "mysql")]
pub(crate) use mysql::connect as connect_mysql;
#[cfg(feature = "postgres")]
pub(crate) use postgres::connect;

use lockward::StoreUrl;

/// The database server of a store, for this variant.
#[derive(Debug, Clone)]
pub enum Database {
    /// PostgreSQL (plain connections).
    #[cfg(feature = "postgres")]
    Postgres(lockward::url::PostgresUrl),
    /// MySQL or MariaDB.
    #[cfg(feature = "mysql")]
    Mysql(lockward::url::MysqlUrl),
}

/// The database of `url`, if it is one this variant can use (plain
/// connections; TLS is left to lockward's own backends).
pub fn server(url: &str) -> Option<Database> {
    match StoreUrl::parse(url).ok()? {
        #[cfg(feature = "postgres")]
        StoreUrl::Postgres(pg) if !pg.tls => Some(Database::Postgres(pg)),
        #[cfg(feature = "mysql")]
        StoreUrl::Mysql(my) if my.ssl_mode == lockward::url::MysqlSslMode::Disabled => {
            Some(Database::Mysql(my))
        }
        _ => None,
    }
}

/// The stock table of demo run `run`.
fn table(run: &str) -> String {
    format!("lockward_demo_stock_{run}")
}

/// Creates the stock row (5 items).
pub async fn stock(db: &Database, run: &str) -> Result<(), String> {
    match db {
        #[cfg(feature = "postgres")]
        Database::Postgres(pg) => postgres::stock(pg, run).await,
        #[cfg(feature = "mysql")]
        Database::Mysql(my) => mysql::stock(my, run).await,
    }
}

/// Drops the stock table.
pub async fn clean(db: &Database, run: &str) {
    match db {
        #[cfg(feature = "postgres")]
        Database::Postgres(pg) => postgres::clean(pg, run).await,
        #[cfg(feature = "mysql")]
        Database::Mysql(my) => mysql::clean(my, run).await,
    }
}

/// One buyer: lock the row, take an item if any is left. `true` when sold.
pub async fn buy(db: &Database, run: &str) -> Result<bool, String> {
    match db {
        #[cfg(feature = "postgres")]
        Database::Postgres(pg) => postgres::buy(pg, run).await,
        #[cfg(feature = "mysql")]
        Database::Mysql(my) => mysql::buy(my, run).await,
    }
}
