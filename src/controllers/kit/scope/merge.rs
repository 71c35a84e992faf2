//! Several namespaces' watch events as one store's: one initial list (`Init` at the first
//! namespace's, `InitDone` once every namespace has listed), and after it a namespace's relist
//! as applies, then deletes of what the store holds in that namespace and the relist did not
//! bring. A store fed the raw streams would be replaced by each namespace's list in turn.

use std::collections::HashSet;

use kube::runtime::watcher::Event;

/// What [`Merge::feed`] passes on: an event, or a sweep resolved against the store only when
/// it is reached (so the events before it have been applied).
#[derive(Debug)]
pub enum Out<K> {
    Event(Event<K>),
    /// Delete what the store holds in `namespace` outside `keep` (names).
    Sweep {
        namespace: String,
        keep: HashSet<String>,
    },
}

impl<K: kube::Resource> Out<K> {
    /// The events this stands for, reading the store's objects through `present`.
    pub fn resolve(self, present: &dyn Fn(&str) -> Vec<K>) -> Vec<Event<K>> {
        match self {
            Out::Event(event) => vec![event],
            Out::Sweep { namespace, keep } => present(&namespace)
                .into_iter()
                .filter(|obj| !keep.contains(obj.meta().name.as_deref().unwrap_or_default()))
                .map(Event::Delete)
                .collect(),
        }
    }
}

/// The merge state: per namespace (by index) its relist in progress and whether it has listed.
#[derive(Debug)]
pub struct Merge<K> {
    namespaces: Vec<String>,
    listing: Vec<Option<HashSet<String>>>,
    listed: Vec<bool>,
    /// A namespace listed again before all had listed: what its last list brought.
    relisted: Vec<Option<HashSet<String>>>,
    started: bool,
    synced: bool,
    /// Changes of namespaces that have listed, while others still list: a store applies a
    /// change during its initial list to the old contents, which `InitDone` then replaces.
    held: Vec<(usize, Event<K>)>,
}

impl<K: kube::Resource> Merge<K> {
    pub fn new(namespaces: Vec<String>) -> Self {
        let n = namespaces.len();
        Merge {
            namespaces,
            listing: vec![None; n],
            listed: vec![false; n],
            relisted: vec![None; n],
            started: false,
            synced: false,
            held: Vec::new(),
        }
    }

    /// One event of namespace `i`'s watch; what the store is to see for it.
    pub fn feed(&mut self, i: usize, event: Event<K>) -> Vec<Out<K>> {
        match event {
            Event::Init => {
                self.listing[i] = Some(HashSet::new());
                if self.synced {
                    return Vec::new();
                }
                // Its relist brings the current objects: its held changes are older.
                self.held.retain(|(from, _)| *from != i);
                if std::mem::replace(&mut self.started, true) {
                    Vec::new()
                } else {
                    vec![Out::Event(Event::Init)]
                }
            }
            Event::InitApply(obj) => {
                if let Some(keys) = &mut self.listing[i] {
                    keys.insert(obj.meta().name.clone().unwrap_or_default());
                }
                let event = if self.synced {
                    Event::Apply(obj)
                } else {
                    Event::InitApply(obj)
                };
                vec![Out::Event(event)]
            }
            Event::InitDone => self.listed(i),
            event @ (Event::Apply(_) | Event::Delete(_)) if !self.synced => {
                self.held.push((i, event));
                Vec::new()
            }
            event => vec![Out::Event(event)],
        }
    }

    /// Namespace `i` has listed.
    fn listed(&mut self, i: usize) -> Vec<Out<K>> {
        let keep = self.listing[i].take().unwrap_or_default();
        if self.synced {
            let namespace = self.namespaces[i].clone();
            return vec![Out::Sweep { namespace, keep }];
        }
        if std::mem::replace(&mut self.listed[i], true) {
            // What its earlier list brought is in the store's initial list: swept once synced.
            self.relisted[i] = Some(keep);
        }
        if !self.listed.iter().all(|done| *done) {
            return Vec::new();
        }
        self.synced = true;
        let mut out = vec![Out::Event(Event::InitDone)];
        out.extend(self.held.drain(..).map(|(_, event)| Out::Event(event)));
        for (j, keep) in self.relisted.iter_mut().enumerate() {
            if let Some(keep) = keep.take() {
                let namespace = self.namespaces[j].clone();
                out.push(Out::Sweep { namespace, keep });
            }
        }
        out
    }
}
