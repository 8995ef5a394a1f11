//! Who may command a switch server (issue 24, "any certificate is root"; the role table
//! is in `docs/security.md`).
//!
//! xbind's switch server (paper 000 §II-B) took commands from any CORBA client on the
//! testbed. Here a caller's role and name come from its certificate
//! ([`atmlab_rpc::tls::Caller`]), and [`Authorized`] wraps a backend for one caller:
//!
//! - reads (`describe`, listings) are open to every lab identity;
//! - commands only to `cm` and `admin`;
//! - a manager (`cm`) acts only for its own owner, its certificate's name: a reservation,
//!   unreservation or commit naming another owner is refused, and so is a release, branch
//!   change or modification of a connection another owner holds;
//! - an admin, and a plain-text (`--insecure`) caller, may act for any owner.
//!
//! A refusal is [`FabricError::Forbidden`] (gRPC `PERMISSION_DENIED`), per command: in a
//! continue-on-error batch the others still run, and in an all-or-nothing one nothing
//! does. Refusals are counted ([`AuthzStats`]) and summarised in the log once per
//! interval, as the other refusals are.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use atmlab_rpc::tls::{Caller, Role};

use crate::error::FabricError;
use crate::live::backend::{BatchResult, Description, SwitchBackend};
use crate::switch::{Atomicity, Command, Connection, Reservation};

/// How often refusals are summarised in the log.
const SUMMARY_EVERY: Duration = Duration::from_secs(10);

/// Commands a server refused for the caller's role or owner.
#[derive(Debug, Default)]
pub struct AuthzStats {
    refused: AtomicU64,
    logged: AtomicU64,
    last_log: std::sync::Mutex<Option<std::time::Instant>>,
}

impl AuthzStats {
    /// Commands refused so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    pub(crate) fn count(&self, n: u64, caller: &Caller, first: &FabricError) {
        self.refused.fetch_add(n, Ordering::Relaxed);
        let now = std::time::Instant::now();
        let mut last = self.last_log.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_none_or(|t| now.duration_since(t) >= SUMMARY_EVERY) {
            let total = self.refused();
            let since = total - self.logged.swap(total, Ordering::Relaxed);
            *last = Some(now);
            tracing::warn!(refused = since, total, %caller, last = %first,
                "switch commands refused for the caller's role or owner");
        }
    }
}

/// A backend seen through one caller's rights.
#[derive(Clone)]
pub struct Authorized<B> {
    inner: B,
    caller: Arc<Caller>,
    stats: Arc<AuthzStats>,
}

impl<B: SwitchBackend> Authorized<B> {
    /// `inner`, for `caller`, counting refusals in `stats`.
    pub fn new(inner: B, caller: Caller, stats: Arc<AuthzStats>) -> Self {
        Authorized {
            inner,
            caller: Arc::new(caller),
            stats,
        }
    }

    /// The verdict on each of `commands`: `Ok` to run, or why not.
    async fn check(
        &self,
        commands: &[Command],
    ) -> Result<Vec<Result<(), FabricError>>, FabricError> {
        let caller = &*self.caller;
        if !caller.is(&[Role::Cm]) {
            let why = FabricError::Forbidden(format!(
                "{caller} may not command a switch (only admin, cm)"
            ));
            return Ok(vec![Err(why); commands.len()]);
        }
        // Only a manager is held to an owner; an admin or plain-text caller is not.
        let Some(me) = caller.identity().filter(|id| id.role == Role::Cm) else {
            return Ok(vec![Ok(()); commands.len()]);
        };
        let targets: Vec<u64> = commands.iter().filter_map(target).collect();
        let owners = if targets.is_empty() {
            Vec::new()
        } else {
            self.inner.owners(targets).await?
        };
        let mut owners = owners.into_iter();
        let not_ours = |what: &str, owner: &str| {
            Err(FabricError::Forbidden(format!(
                "{caller} may act only for its own owner {:?}; {what} belongs to {:?}",
                me.name,
                owner.chars().take(64).collect::<String>()
            )))
        };
        Ok(commands
            .iter()
            .map(|c| match c {
                Command::Reserve(r) if *r.owner != *me.name => {
                    not_ours("the reservation", &r.owner)
                }
                Command::Unreserve(r) if *r.owner != *me.name => {
                    not_ours("the reservation", &r.owner)
                }
                Command::Commit(r) if *r.owner != *me.name => not_ours("the commit", &r.owner),
                c => match target(c) {
                    // An unknown connection is the switch's own error to report.
                    Some(id) => match owners.next().flatten() {
                        Some(o) if o != me.name => not_ours(&format!("connection {id}"), &o),
                        _ => Ok(()),
                    },
                    None => Ok(()),
                },
            })
            .collect())
    }
}

/// The existing connection a command acts on, if any.
fn target(c: &Command) -> Option<u64> {
    match c {
        Command::Release(r) => Some(r.connection),
        Command::AddBranch(b) | Command::DropBranch(b) => Some(b.connection),
        Command::Modify(m) => Some(m.connection),
        Command::Reserve(_) | Command::Unreserve(_) | Command::Commit(_) => None,
    }
}

impl<B: SwitchBackend> SwitchBackend for Authorized<B> {
    async fn execute(
        &self,
        commands: Vec<Command>,
        atomicity: Atomicity,
    ) -> Result<BatchResult, FabricError> {
        // An admin or a plain-text caller may do anything: no check, no allocation on
        // the switch's hot path.
        if self.caller.is(&[]) {
            return self.inner.execute(commands, atomicity).await;
        }
        let verdicts = self.check(&commands).await?;
        let refused: Vec<&FabricError> = verdicts.iter().filter_map(|v| v.as_ref().err()).collect();
        let Some(first) = refused.first() else {
            return self.inner.execute(commands, atomicity).await;
        };
        self.stats.count(refused.len() as u64, &self.caller, first);
        if atomicity == Atomicity::AllOrNothing {
            return Ok(verdicts
                .into_iter()
                .map(|v| Err(v.err().unwrap_or(FabricError::Aborted)))
                .collect());
        }
        // Continue-on-error: run the allowed ones, answer each in its place.
        let allowed: Vec<Command> = commands
            .into_iter()
            .zip(&verdicts)
            .filter(|(_, v)| v.is_ok())
            .map(|(c, _)| c)
            .collect();
        let mut ran = if allowed.is_empty() {
            Vec::new()
        } else {
            self.inner.execute(allowed, atomicity).await?
        }
        .into_iter();
        Ok(verdicts
            .into_iter()
            .map(|v| match v {
                Ok(()) => ran
                    .next()
                    .unwrap_or_else(|| Err(FabricError::Unavailable("a result is missing".into()))),
                Err(e) => Err(e),
            })
            .collect())
    }

    async fn describe(&self) -> Result<Description, FabricError> {
        self.read()?;
        self.inner.describe().await
    }

    async fn connections(&self) -> Result<Vec<Connection>, FabricError> {
        self.read()?;
        self.inner.connections().await
    }

    async fn reservations(&self) -> Result<Vec<Reservation>, FabricError> {
        self.read()?;
        self.inner.reservations().await
    }

    async fn owners(&self, ids: Vec<u64>) -> Result<Vec<Option<String>>, FabricError> {
        self.read()?;
        self.inner.owners(ids).await
    }
}

impl<B> Authorized<B> {
    /// Reads are open to every identity with a role.
    fn read(&self) -> Result<(), FabricError> {
        if self.caller.is(&Role::ALL) {
            Ok(())
        } else {
            Err(FabricError::Forbidden(format!(
                "{} may not read this switch",
                self.caller
            )))
        }
    }
}
