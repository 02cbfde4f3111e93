//! A core and the sink its tests read: one packet at a time through the per-packet calls,
//! whatever finished at once (a synchronous driver) passed to the sink as an asynchronous
//! driver's completions are, so a test reads every result in one place.

use std::ops::Deref;
use std::sync::{Arc, Mutex};

use ipsec_core::db::{ControlError, Response};
use ipsec_core::sad::Event;
use ipsec_core::setkey;
use ipsec_core::stats::Drop;
use ipsec_core::{Ipsec, Packet, Payload, Results, Sink, Via};

pub struct Gateway<S: Sink + 'static> {
    core: Ipsec,
    sink: Arc<S>,
}

impl<S: Sink + 'static> Gateway<S> {
    pub fn new(fw: ocf::Framework, sink: Arc<S>) -> Gateway<S> {
        Gateway { core: Ipsec::new(fw, sink.clone()), sink }
    }

    /// Carries out setkey text (which must parse) as one transaction; the responses.
    pub fn setkey(&self, text: &str) -> Result<Vec<Response>, ControlError> {
        let reqs = setkey::parse(text).unwrap_or_else(|e| panic!("{e}: {text}"));
        self.transact(|t| reqs.iter().map(|r| t.apply(&r.item)).collect())
    }

    fn pass<T>(&self, r: T, out: Results) -> T {
        for p in out.transmit {
            self.sink.transmit(p);
        }
        for p in out.deliver {
            self.sink.deliver(p);
        }
        r
    }

    pub fn output(&self, p: Packet) -> Result<(), Drop> {
        let mut out = Results::default();
        self.pass(self.core.output_one(p, &mut out), out)
    }

    pub fn input(&self, p: Packet) -> Result<(), Drop> {
        self.input_via(p, Via::Ip)
    }

    pub fn input_via(&self, p: Packet, via: Via) -> Result<(), Drop> {
        let mut out = Results::default();
        self.pass(self.core.input_one(p, via, &mut out), out)
    }

    pub fn input_payload(&self, p: Payload) -> Result<(), Drop> {
        let mut out = Results::default();
        self.pass(self.core.input_payload(p, &mut out), out)
    }

    /// The packet path's and the tick's events since the last call ([`Ipsec::take_events`]
    /// without the control path's changes, which every configuration step makes: those
    /// are `ipsecd`'s `tests/monitor.rs`'s).
    pub fn take_events(&self) -> Vec<Event> {
        let mut ev = self.core.take_events();
        ev.retain(|e| !matches!(e, Event::Changed(_)));
        ev
    }
}

impl<S: Sink + 'static> Deref for Gateway<S> {
    type Target = Ipsec;
    fn deref(&self) -> &Ipsec {
        &self.core
    }
}

/// A gateway on the soft driver whose sink collects: the gateway and its sink.
pub fn soft() -> (Gateway<Collect>, Arc<Collect>) {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    let sink = Arc::new(Collect::default());
    (Gateway::new(fw, sink.clone()), sink)
}

/// A sink that keeps every packet's bytes, by direction.
#[derive(Default)]
pub struct Collect {
    pub sent: Mutex<Vec<Vec<u8>>>,
    pub delivered: Mutex<Vec<Vec<u8>>>,
}

impl Sink for Collect {
    fn transmit(&self, p: Packet) {
        self.sent.lock().unwrap().push(p.bytes().to_vec());
    }
    fn deliver(&self, p: Packet) {
        self.delivered.lock().unwrap().push(p.bytes().to_vec());
    }
}

impl Collect {
    pub fn take_sent(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.sent.lock().unwrap())
    }
    pub fn take_delivered(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.delivered.lock().unwrap())
    }
}
