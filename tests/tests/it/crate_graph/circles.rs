//! The circles of an import graph: its strongly connected components (Tarjan).

use super::*;

/// The graph's strongly connected components of more than one module: its circles (Tarjan).
pub(super) fn circles(graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Vec<Vec<ModulePath>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<ModulePath, BTreeSet<ModulePath>>,
        index: BTreeMap<&'a ModulePath, (usize, usize)>,
        stack: Vec<&'a ModulePath>,
        found: Vec<Vec<ModulePath>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, node: &'a ModulePath) {
            let order = self.index.len();
            self.index.insert(node, (order, order));
            self.stack.push(node);
            for next in self.graph.get(node).into_iter().flatten() {
                match self.index.get(next).copied() {
                    None => {
                        self.visit(next);
                        let low = self.index[next].1.min(self.index[node].1);
                        self.index.get_mut(node).unwrap().1 = low;
                    }
                    Some((seen, _)) if self.stack.contains(&next) => {
                        let low = seen.min(self.index[node].1);
                        self.index.get_mut(node).unwrap().1 = low;
                    }
                    Some(_) => {}
                }
            }
            if self.index[node].0 == self.index[node].1 {
                let at = self.stack.iter().rposition(|n| *n == node).unwrap();
                let component: Vec<ModulePath> = self.stack.drain(at..).cloned().collect();
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node) {
            walk.visit(node);
        }
    }
    walk.found
}
