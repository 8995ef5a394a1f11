//! The one driver every TINA performer shell runs its core with (paper 001 §4.3: the
//! re-engineered CM "processing multiple requests concurrently and parallelizing the
//! establishment of sub-connections"; DESIGN.md §2: one core, thin shells).
//!
//! A `Driver` holds a core behind a lock. An operation enters under a fresh id; after
//! every input the driver drains the core: each emitted invocation is counted in the
//! deployment's totals and performed on a task of its own (the emulated round trip, then
//! the remote call), whose answer goes back into the core, which is drained again; each
//! finished operation's reply goes to the caller waiting for it. The core, not the
//! driver, decides what runs concurrently: it emits one invocation at a time where it
//! must wait (sequential setup) and a batch where it need not (parallel setup), and the
//! driver runs whatever it was given at once.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::Invocations;
use super::core::{InvocationId, OpId, SncCore, SncError, SncReply, SncRequest};

/// Waits the emulated network round trip of one remote invocation (none when zero).
pub(crate) async fn wire(delay: Duration) {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
}

/// A core as its driver sees it.
pub trait Machine: Send + 'static {
    /// An operation.
    type Request: Send + 'static;
    /// Its answer.
    type Reply: Send + 'static;
    /// An invocation the core emits.
    type Call: Send + 'static;
    /// The answer to one.
    type Answer: Send + 'static;

    /// A new operation `op`.
    fn request(&mut self, op: OpId, r: Self::Request);
    /// The answer to invocation `id`.
    fn answer(&mut self, id: InvocationId, a: Self::Answer);
    /// The next invocation: its id, the interface it counts under (`None`: a local
    /// call, not counted), and what to invoke.
    fn poll_call(&mut self) -> Option<(InvocationId, Option<&'static str>, Self::Call)>;
    /// The next finished operation.
    fn poll_reply(&mut self) -> Option<(OpId, Result<Self::Reply, SncError>)>;
    /// The answer to `call` when performing it failed in the shell (its task died).
    fn lost(call: &Self::Call, e: SncError) -> Self::Answer;
}

/// The EML-CP's and the NML-CP's cores, as they are.
impl<C> Machine for C
where
    C: SncCore + Send + 'static,
    C::Call: Send + 'static,
    C::Done: Send + 'static,
{
    type Request = SncRequest;
    type Reply = SncReply;
    type Call = C::Call;
    type Answer = Result<C::Done, SncError>;

    fn request(&mut self, op: OpId, r: SncRequest) {
        self.handle_request(op, r);
    }
    fn answer(&mut self, id: InvocationId, a: Self::Answer) {
        self.handle_answer(id, a);
    }
    fn poll_call(&mut self) -> Option<(InvocationId, Option<&'static str>, C::Call)> {
        self.poll_transmit().map(|t| (t.id, Some(t.iface), t.call))
    }
    fn poll_reply(&mut self) -> Option<(OpId, Result<SncReply, SncError>)> {
        SncCore::poll_reply(self)
    }
    fn lost(_: &C::Call, e: SncError) -> Self::Answer {
        Err(e)
    }
}

/// How a shell performs one invocation.
pub(crate) type Perform<C, A> =
    Box<dyn Fn(C) -> Pin<Box<dyn Future<Output = A> + Send>> + Send + Sync>;

type Waiter<R> = tokio::sync::oneshot::Sender<Result<R, SncError>>;

struct State<M: Machine> {
    machine: M,
    waiting: HashMap<OpId, Waiter<M::Reply>>,
    next_op: OpId,
}

/// A core and the means to perform its invocations.
pub(crate) struct Driver<M: Machine> {
    state: Mutex<State<M>>,
    perform: Perform<M::Call, M::Answer>,
    totals: Invocations,
}

impl<M: Machine> Driver<M> {
    /// A driver of `machine`, performing with `perform`, counting in `totals`.
    pub(crate) fn new(
        machine: M,
        perform: Perform<M::Call, M::Answer>,
        totals: Invocations,
    ) -> Arc<Self> {
        Arc::new(Driver {
            state: Mutex::new(State {
                machine,
                waiting: HashMap::new(),
                next_op: 1,
            }),
            perform,
            totals,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State<M>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads or changes the core outside any operation (queries).
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut M) -> T) -> T {
        f(&mut self.lock().machine)
    }

    /// Runs one operation to its end. Dropping the future does not stop the operation:
    /// the core finishes it (a half-done operation would leave state behind).
    pub(crate) async fn run(self: &Arc<Self>, r: M::Request) -> Result<M::Reply, SncError> {
        self.start(r)
            .await
            .unwrap_or_else(|_| Err(SncError::internal("the performer dropped the operation")))
    }

    fn start(
        self: &Arc<Self>,
        r: M::Request,
    ) -> tokio::sync::oneshot::Receiver<Result<M::Reply, SncError>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut st = self.lock();
        let op = st.next_op;
        st.next_op += 1;
        st.waiting.insert(op, tx);
        st.machine.request(op, r);
        self.drain(st);
        rx
    }

    /// Hands out what the core emitted: replies to their callers, invocations to tasks.
    fn drain(self: &Arc<Self>, mut st: MutexGuard<'_, State<M>>) {
        let mut calls = Vec::new();
        while let Some(c) = st.machine.poll_call() {
            calls.push(c);
        }
        let mut replies = Vec::new();
        while let Some((op, r)) = st.machine.poll_reply() {
            if let Some(tx) = st.waiting.remove(&op) {
                replies.push((tx, r));
            }
        }
        drop(st);
        for (tx, r) in replies {
            // The caller may have gone; the operation is finished either way.
            let _ = tx.send(r);
        }
        for (id, iface, call) in calls {
            if let Some(iface) = iface {
                self.totals.count(iface);
            }
            let lost = M::lost(&call, SncError::internal("the invocation's task failed"));
            let task = tokio::spawn((self.perform)(call));
            let me = self.clone();
            tokio::spawn(async move {
                let answer = task.await.unwrap_or_else(|e| {
                    tracing::error!(error = %e, "TINA: an invocation's task failed");
                    lost
                });
                let mut st = me.lock();
                st.machine.answer(id, answer);
                me.drain(st);
            });
        }
    }
}
