//! The connection performers of TINA as gRPC services (paper 001 §1.2.1): the EML-CP,
//! one per switch, and the NML-CP, one per subnetwork. Both serve the one
//! `atmlab.v1.ConnectionPerformer` interface (tina.proto), as TINA's EML-CP specializes
//! the NML-CP's subnetwork connection (SNC) interface, so a parent invokes a child
//! subnetwork and a switch alike.
//!
//! Each is a thin shell over its core ([`EmlCore`], [`NmlCore`]): [`Performer`] turns a
//! request into the core's operation, lets the shell's driver run it, and turns the
//! answer back; what an EML-CP invokes is its switch server (one unary call per switch
//! command), what an NML-CP invokes is a [`Child`]. Every invocation waits the emulated
//! round trip first ([`super::TinaConfig::invocation_delay`]) and counts in the
//! deployment's totals ([`Invocations`]).

use std::sync::Arc;
use std::time::Duration;

use atmlab_fabric::live::convert as cv;
use atmlab_fabric::switch::{Command, Reply};
use atmlab_rpc::v1 as pb;
use atmlab_rpc::v1::command::Op;
use atmlab_rpc::v1::connection_performer_client::ConnectionPerformerClient;
use atmlab_rpc::v1::connection_performer_server::ConnectionPerformer;
use atmlab_rpc::v1::switch_server_client::SwitchServerClient;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use super::convert::{self, Wire, WireReply};
use super::core::eml::EmlCore;
use super::core::nml::{ChildCall, NmlCore};
use super::core::{ErrorKind, SncError, SncReply, SncRequest, SncResult};
use super::partition::Subnetwork;
use super::shell::{Driver, Machine, wire};
use super::{Invocations, SetupMode};
use crate::cm::faults::{Fate, FaultInjector, FaultPlan, stream_id};

/// A performer: a core behind its driver, serving ConnectionPerformer.
pub struct Performer<M: Machine> {
    driver: Arc<Driver<M>>,
}

/// Another handle on the same performer (its server and its deployment share it).
impl<M: Machine> Clone for Performer<M> {
    fn clone(&self) -> Self {
        Performer {
            driver: self.driver.clone(),
        }
    }
}

impl<M: Machine> Performer<M> {
    /// Its core, for what is done outside any operation (a restart's start-up audit).
    pub(crate) fn driver(&self) -> &Arc<Driver<M>> {
        &self.driver
    }
}

/// The Element Management Layer Connection Performer of one switch.
pub type EmlCp = Performer<EmlCore>;

/// The Network Management Layer Connection Performer of one subnetwork.
pub type NmlCp = Performer<NmlCore>;

impl EmlCp {
    /// The EML-CP of `switch`, driving it through `client` as `owner`, each call to the
    /// switch after the emulated round trip `delay`.
    pub fn new(
        switch: String,
        client: SwitchServerClient<Channel>,
        owner: String,
        totals: Invocations,
        delay: Duration,
    ) -> Self {
        Self::with_faults(switch, client, owner, totals, delay, None)
    }

    /// [`EmlCp::new`], losing the plan's `drop` fraction of the commands on the way to
    /// the switch and of the answers on the way back (seeded per switch and direction,
    /// as the other managers' links are; see [`super::TinaConfig::faults`]).
    pub fn with_faults(
        switch: String,
        client: SwitchServerClient<Channel>,
        owner: String,
        totals: Invocations,
        delay: Duration,
        faults: Option<FaultPlan>,
    ) -> Self {
        let lossy = faults.map(|plan| {
            let drop_only = FaultPlan {
                drop: plan.drop,
                duplicate: 0.0,
                delay: 0.0,
                reorder: 0.0,
                ..plan
            };
            Arc::new(std::sync::Mutex::new((
                FaultInjector::new(drop_only, stream_id(&switch, true)),
                FaultInjector::new(drop_only, stream_id(&switch, false)),
            )))
        });
        let name = switch.clone();
        let perform = Box::new(move |command: Command| {
            let client = client.clone();
            let lossy = lossy.clone();
            let name = name.clone();
            Box::pin(async move {
                wire(delay).await;
                let lost = |way: bool| {
                    lossy.as_ref().is_some_and(|l| {
                        let mut l = l.lock().unwrap_or_else(|e| e.into_inner());
                        let i = if way { &mut l.0 } else { &mut l.1 };
                        i.decide() == Fate::Drop
                    })
                };
                if lost(true) {
                    return Err(SncError::new(
                        ErrorKind::Unavailable,
                        format!("switch server {name} did not answer (the command was lost)"),
                    ));
                }
                let r = switch_call(client, command).await;
                if lost(false) {
                    return Err(SncError::new(
                        ErrorKind::Unavailable,
                        format!("switch server {name} did not answer (the answer was lost)"),
                    ));
                }
                r
            }) as _
        });
        let driver = Driver::new(EmlCore::new(switch, owner), perform, totals);
        Performer { driver }
    }
}

/// One switch command as the switch server's unary call of the same name.
async fn switch_call(
    mut c: SwitchServerClient<Channel>,
    command: Command,
) -> Result<Reply, SncError> {
    let ids = |v: &[pb::VcId]| {
        v.iter()
            .map(|i| cv::vc_id(Some(i)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| SncError::internal(e.to_string()))
    };
    let reply = match cv::pb_command(&command).op {
        Some(Op::Reserve(r)) => Reply::Reserved(ids(&c.reserve(r).await?.into_inner().ids)?),
        Some(Op::Unreserve(r)) => c.unreserve(r).await.map(|_| Reply::Unreserved)?,
        Some(Op::Commit(r)) => {
            let rep = c.commit(r).await?.into_inner();
            // The EML-CP asks for no replenishment; whatever comes back must not turn a
            // commit the switch accepted into a refusal (it would orphan the cross-connect).
            Reply::Committed {
                connection: rep.connection,
                replenished: ids(&rep.replenished).unwrap_or_default(),
            }
        }
        Some(Op::Release(r)) => c.release(r).await.map(|_| Reply::Released)?,
        Some(Op::AddBranch(r)) => c.add_branch(r).await.map(|_| Reply::BranchAdded)?,
        Some(Op::DropBranch(r)) => c.drop_branch(r).await.map(|_| Reply::BranchDropped)?,
        Some(Op::Modify(r)) => c.modify(r).await.map(|_| Reply::Modified)?,
        None => return Err(SncError::internal("a switch command without an operation")),
    };
    Ok(reply)
}

/// A child of an NML-CP: a performer and the interface its invocations count under
/// ("nml->nml", "nml->eml", or "nml->eml (co-located)"). The LNC invokes the root
/// NML-CP as one, too.
#[derive(Clone)]
pub struct Child {
    /// Where the child is.
    pub target: ChildTarget,
    /// The interface name.
    pub iface: &'static str,
    /// The emulated network round trip of each invocation ([`super::TinaConfig`]); a
    /// co-located child pays none.
    pub delay: Duration,
}

/// Where a [`Child`] runs.
#[derive(Clone)]
pub enum ChildTarget {
    /// Behind its gRPC server.
    Remote(ConnectionPerformerClient<Channel>),
    /// An EML-CP in the caller's address space, called directly: no marshalling, no
    /// transport (paper 001 §4.2's co-located configuration).
    Local(Arc<EmlCp>),
}

impl std::fmt::Debug for Child {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = match &self.target {
            ChildTarget::Remote(_) => "remote",
            ChildTarget::Local(_) => "local",
        };
        f.debug_struct("Child")
            .field("target", &at)
            .field("iface", &self.iface)
            .field("delay", &self.delay)
            .finish()
    }
}

impl Child {
    /// A child behind its gRPC server.
    pub fn remote(
        client: ConnectionPerformerClient<Channel>,
        iface: &'static str,
        delay: Duration,
    ) -> Child {
        Child {
            target: ChildTarget::Remote(client),
            iface,
            delay,
        }
    }

    /// Invokes the child: a local child directly; a remote one after the emulated
    /// round trip, through the operation's gRPC call.
    pub async fn invoke(&self, request: SncRequest) -> SncResult {
        let mut c = match &self.target {
            ChildTarget::Local(eml) => return eml.driver.run(request).await,
            ChildTarget::Remote(c) => c.clone(),
        };
        wire(self.delay).await;
        match request {
            SncRequest::Setup(s) => answer(c.setup_snc(convert::pb_setup(&s)).await),
            SncRequest::Release { snc } => {
                answer(c.release_snc(pb::ReleaseSncRequest { snc }).await)
            }
            SncRequest::Modify { snc, traffic } => {
                answer(c.modify_snc(convert::pb_modify(snc, traffic)).await)
            }
            SncRequest::ReserveLink(l) => answer(c.reserve_link(convert::pb_reserve_link(l)).await),
            SncRequest::UnreserveLink(l, id) => {
                answer(c.unreserve_link(convert::pb_unreserve_link(l, id)).await)
            }
            SncRequest::AddBranch(b) => answer(c.add_branch(convert::pb_add_branch(b)).await),
            SncRequest::DropBranch(b, id) => {
                answer(c.drop_branch(convert::pb_drop_branch(b, id)).await)
            }
            SncRequest::Trim { snc, keep } => {
                answer(c.trim_snc(pb::TrimSncRequest { snc, keep }).await)
            }
        }
    }
}

fn answer<R: WireReply>(r: Result<Response<R>, Status>) -> SncResult {
    r?.into_inner().into_core()
}

impl NmlCp {
    /// The NML-CP of `subnetwork`, its children in the order of
    /// [`Subnetwork::child_of`] (child subnetworks, or at the lowest level one EML-CP
    /// per switch).
    pub fn new(
        subnetwork: Subnetwork,
        children: Vec<Child>,
        mode: SetupMode,
        totals: Invocations,
    ) -> Self {
        let ifaces = children.iter().map(|c| c.iface).collect();
        let core = NmlCore::new(subnetwork, ifaces, mode);
        let perform = Box::new(move |ChildCall { child, request }: ChildCall| {
            let child = children.get(child).cloned();
            Box::pin(async move {
                match child {
                    Some(c) => c.invoke(request).await,
                    None => Err(SncError::internal("no such child")),
                }
            }) as _
        });
        Performer {
            driver: Driver::new(core, perform, totals),
        }
    }
}

impl<M: Machine<Request = SncRequest, Reply = SncReply>> Performer<M> {
    /// One request: converted, run by the core, its answer converted back.
    async fn serve<Q: Wire>(&self, r: Request<Q>) -> Result<Response<Q::Reply>, Status> {
        // Performers take invocations from their parents (the deployment's own `cm`
        // identity) and operators only: an SNC operation commits cross-connects.
        atmlab_rpc::tls::Caller::of(&r).require(
            &[atmlab_rpc::tls::Role::Cm],
            "invoke a connection performer",
        )?;
        let request = r
            .into_inner()
            .into_core()
            .map_err(|e| convert::status(&e))?;
        let reply = self
            .driver
            .run(request)
            .await
            .map_err(|e| convert::status(&e))?;
        Q::Reply::from_core(reply)
            .map(Response::new)
            .ok_or_else(|| Status::internal("the performer answered another operation"))
    }
}

/// The eight operations of the service, each the one [`Performer::serve`].
macro_rules! serve_all {
    ($($name:ident: $req:ident -> $rep:ident;)*) => {
        #[tonic::async_trait]
        impl<M: Machine<Request = SncRequest, Reply = SncReply>> ConnectionPerformer
            for Performer<M>
        {
            $(
                async fn $name(&self, r: Request<pb::$req>) -> Result<Response<pb::$rep>, Status> {
                    self.serve(r).await
                }
            )*
        }
    };
}

serve_all! {
    setup_snc: SetupSncRequest -> SetupSncReply;
    release_snc: ReleaseSncRequest -> ReleaseSncReply;
    modify_snc: ModifySncRequest -> ModifySncReply;
    reserve_link: ReserveLinkRequest -> ReserveLinkReply;
    unreserve_link: UnreserveLinkRequest -> UnreserveLinkReply;
    add_branch: AddSncBranchRequest -> AddSncBranchReply;
    drop_branch: DropSncBranchRequest -> DropSncBranchReply;
    trim_snc: TrimSncRequest -> TrimSncReply;
}
