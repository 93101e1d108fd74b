//! The layering rule of ARCHITECTURE.md, checked on the source tree: which top-level modules of `src/` may import
//! which, and that no two import each other (directly or through others).
//!
//! A module "imports" another when its code (comments and string literals aside) names `crate::<other>` — in a
//! `use` declaration, a `use crate::{a, b}` group or an inline path. The checks run as unit tests over the files
//! under `src/`; they read the tree at `CARGO_MANIFEST_DIR`, so they see exactly what is compiled.

use std::collections::{BTreeMap, BTreeSet};

/// The pure domain core: no IO, no HTTP, no SQL, no jobs, bottom layer first. A core module may import the ones
/// before it here and nothing in [`OUTER`] (ARCHITECTURE.md's picture lists them top layer first).
pub const CORE: [&str; 8] = ["hw", "op", "samples", "comm", "kernel", "cost", "learn", "llm"];

/// The modules around the core: parsers, storage, HTTP, orchestration, background jobs, wiring, the command
/// line, accuracy reports, configuration and metrics. The core imports none of them.
pub const OUTER: [&str; 11] =
    ["ingest", "store", "api", "service", "jobs", "bundle", "app", "eval", "cli", "config", "metrics"];

/// Top-level module → the top-level modules its code names. `files` are (path relative to `src/`, contents);
/// `lib.rs` and `main.rs` are the crate roots and belong to no module.
pub fn import_graph(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = files.iter().filter_map(|(p, _)| top_module(p)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for (path, text) in files {
        let Some(from) = top_module(path) else { continue };
        for to in crate_paths(&strip_comments_and_strings(text)) {
            if to != from && modules.contains(&to) {
                graph.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    graph
}

/// The top-level module a file under `src/` belongs to (`comm/calibrate/nccl.rs` → `comm`, `config.rs` →
/// `config`); `None` for the crate roots.
fn top_module(path: &str) -> Option<String> {
    let first = path.split('/').next()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main" && !name.is_empty()).then(|| name.to_string())
}

/// The first segment after every `crate::` in `code`, including each member of a `crate::{a, b::c}` group.
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        // `crate::` must start a path (not the tail of `my_crate::`).
        let standalone = i == 0 || !rest[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_');
        rest = &rest[i + "crate::".len()..];
        if !standalone {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = matching_brace(group).unwrap_or(group.len());
            let mut depth = 0usize;
            let mut start = 0usize;
            for (j, c) in group[..end].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth = depth.saturating_sub(1),
                    ',' if depth == 0 => {
                        out.push(ident(&group[start..j]));
                        start = j + 1;
                    }
                    _ => {}
                }
            }
            out.push(ident(&group[start..end]));
        } else {
            out.push(ident(rest));
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Index of the `}` closing a group whose `{` was just consumed.
fn matching_brace(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(i),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// The leading identifier of `s` after whitespace.
fn ident(s: &str) -> String {
    s.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

/// `code` with `//` comments (doc comments included), `/* */` comments and string literals blanked, so that a doc
/// link or a message mentioning `crate::x` is not an import.
fn strip_comments_and_strings(code: &str) -> String {
    let b = code.as_bytes();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && b.get(i + 2) == Some(&b'\'') {
            // A character literal such as '"' or '{' (lifetimes have no closing quote two bytes on).
            out.push_str("' '");
            i += 3;
        } else {
            let c = code[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Every (core module, outer module) pair where the core module imports the outer one.
pub fn core_violations(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for core in CORE {
        for to in graph.get(core).into_iter().flatten() {
            if OUTER.contains(&to.as_str()) {
                out.push((core.to_string(), to.clone()));
            }
        }
    }
    out
}

/// Every (core module, core module) pair where a module imports one listed after it in [`CORE`] (a higher layer).
pub fn upward_imports(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<(String, String)> {
    let rank = |m: &str| CORE.iter().position(|c| *c == m);
    let mut out = Vec::new();
    for (i, from) in CORE.iter().enumerate() {
        for to in graph.get(*from).into_iter().flatten() {
            if rank(to).is_some_and(|j| j > i) {
                out.push((from.to_string(), to.clone()));
            }
        }
    }
    out
}

/// The strongly connected components with more than one module (each is an import cycle), by Tarjan's algorithm.
pub fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            self.index.insert(v, self.next);
            self.low.insert(v, self.next);
            self.next += 1;
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.graph.contains_key(w) {
                    continue;
                }
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low[v];
                    self.low.insert(v, lv.min(lw));
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low[v];
                    self.low.insert(v, lv.min(iw));
                }
            }
            if self.low[v] == self.index[v] {
                let mut scc = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    scc.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    self.out.push(scc);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn read_tree(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                read_tree(&p, root, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }

    fn source_tree() -> Vec<(String, String)> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        read_tree(&root, &root, &mut files);
        files
    }

    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect()
    }

    #[test]
    fn the_domain_core_imports_nothing_outside_it() {
        let graph = import_graph(&source_tree());
        for m in CORE {
            assert!(graph.contains_key(m), "core module {m} not found under src/");
        }
        assert_eq!(core_violations(&graph), Vec::<(String, String)>::new(), "core → outer imports");
    }

    #[test]
    fn core_modules_import_only_the_layers_below_them() {
        let graph = import_graph(&source_tree());
        assert_eq!(upward_imports(&graph), Vec::<(String, String)>::new(), "core imports against the layer order");
    }

    #[test]
    fn an_upward_import_in_the_core_is_caught() {
        let g = import_graph(&files(&[
            ("llm/mod.rs", "use crate::cost::CostBackend;"),
            ("cost/mod.rs", "use crate::learn::Registry;"),
            ("learn/mod.rs", "use crate::cost::Source;"),
            ("hw/mod.rs", ""),
        ]));
        assert_eq!(upward_imports(&g), vec![("cost".to_string(), "learn".to_string())]);
    }

    #[test]
    fn no_two_top_level_modules_import_each_other() {
        let graph = import_graph(&source_tree());
        assert_eq!(cycles(&graph), Vec::<Vec<String>>::new(), "import cycles between top-level modules");
    }

    #[test]
    fn every_top_level_module_is_placed_in_a_layer() {
        let graph = import_graph(&source_tree());
        let unplaced: Vec<&String> = graph
            .keys()
            .filter(|m| !CORE.contains(&m.as_str()) && !OUTER.contains(&m.as_str()) && *m != "layering")
            .collect();
        assert!(
            unplaced.is_empty(),
            "modules in no layer: {unplaced:?} (add them to CORE or OUTER and ARCHITECTURE.md)"
        );
    }

    #[test]
    fn the_checker_sees_use_groups_inline_paths_and_ignores_comments() {
        let g = import_graph(&files(&[
            ("comm/mod.rs", "use crate::{hw::GpuSpec, samples::{CommSample, Attributes}};\n"),
            ("hw/gpu.rs", "//! see [`crate::store`]\nfn f() { let s = \"crate::api\"; let q = '\"'; }\n"),
            ("llm/predict.rs", "fn f(t: &crate::cost::Timed) -> f64 { t.time_us }\n"),
            ("samples.rs", ""),
            ("store/mod.rs", ""),
            ("api/mod.rs", ""),
            ("cost/mod.rs", ""),
            ("lib.rs", "pub mod store; use crate::api;"),
        ]));
        assert_eq!(g["comm"], BTreeSet::from(["hw".to_string(), "samples".to_string()]));
        assert!(g["hw"].is_empty(), "doc links, strings and char literals are not imports: {:?}", g["hw"]);
        assert_eq!(g["llm"], BTreeSet::from(["cost".to_string()]));
        assert!(!g.contains_key("lib"), "the crate root belongs to no module");
    }

    #[test]
    fn a_core_module_importing_the_store_is_caught() {
        let g = import_graph(&files(&[
            ("kernel/sample.rs", "use crate::ingest::KernelSample;\nuse crate::hw::GpuSpec;\n"),
            ("ingest/mod.rs", ""),
            ("hw/mod.rs", ""),
            ("llm/mod.rs", "use crate::{cost, service::Service};"),
            ("cost/mod.rs", ""),
            ("service/mod.rs", ""),
        ]));
        assert_eq!(
            core_violations(&g),
            vec![("kernel".to_string(), "ingest".to_string()), ("llm".to_string(), "service".to_string())]
        );
    }

    #[test]
    fn a_cycle_through_a_third_module_is_caught() {
        let g = import_graph(&files(&[
            ("service/mod.rs", "use crate::jobs::Job;"),
            ("jobs/mod.rs", "use crate::config::Config;"),
            ("config.rs", "use crate::service::Service;"),
            ("hw/mod.rs", ""),
            ("llm/mod.rs", "use crate::hw::GpuSpec;"),
        ]));
        assert_eq!(cycles(&g), vec![vec!["config".to_string(), "jobs".to_string(), "service".to_string()]]);
    }
}
