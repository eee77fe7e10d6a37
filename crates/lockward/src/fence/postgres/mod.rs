//! Fences on PostgreSQL: a register that checks them in its own upsert
//! ([`PostgresRegister`]), and guarded tables, where the database itself
//! refuses a write that carries an older fence than the last one claimed
//! ([`PostgresGuard`]), also from programs that know nothing of lockward.

mod doctor;
mod guard;
mod register;
mod session;
mod sql;

pub use guard::PostgresGuard;
pub use register::PostgresRegister;
pub use session::{session_options, set_fences_statement};
