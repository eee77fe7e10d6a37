//! Fences on MySQL and MariaDB: a register that checks them in its own
//! upsert ([`MysqlRegister`]), and guarded tables, where the database
//! itself refuses a write that carries an older fence than the last one
//! claimed ([`MysqlGuard`]), also from programs that know nothing of
//! lockward.

mod claim;
mod doctor;
mod guard;
mod register;
mod session;
mod sql;

pub use guard::MysqlGuard;
pub use register::MysqlRegister;
pub use session::init_command;
