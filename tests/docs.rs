//! The documentation cannot rot silently: every relative link and `#anchor` of `README.md`, `ARCHITECTURE.md` and
//! the book (`docs/src/`) resolves, every `{{#include}}` names a file, every page of the book is in `SUMMARY.md`, and
//! every request body the README shows is the example file it names. The examples themselves are sent to the real
//! router by `tests/api/examples.rs`; `scripts/test` builds the book with mdBook before the cargo tests.
//!
//! Anchors are computed as mdBook 0.5 computes them (`mdbook-html` `utils::id_from_content` and `unique_id`): the
//! heading's text, trimmed and lowercased; alphanumerics, `_` and `-` kept, whitespace turned into `-`, everything else
//! dropped; a repeated id gets `-1`, `-2`, … For headings without punctuation other than these this is also GitHub's
//! rule, so the README's links work on both.
//!
//! No perfcast code is used: this binary parses Markdown (pulldown-cmark, the parser mdBook uses, with its options)
//! and reads files.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn book_src() -> PathBuf {
    root().join("docs/src")
}

/// mdBook's parser options (`mdbook-markdown` `new_cmark_parser`, with the defaults of `[output.html]`).
fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES
        | Options::ENABLE_SMART_PUNCTUATION
}

/// mdBook's `id_from_content`.
fn heading_id(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c)
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// What one Markdown file offers and asks for.
#[derive(Default)]
struct Page {
    /// The ids of its headings, made unique as mdBook does.
    anchors: BTreeSet<String>,
    /// Every link and image destination with the line it is on.
    links: Vec<(usize, String)>,
    /// The `{{#include PATH}}` directives (path before any `:anchor` or line range) with their line.
    includes: Vec<(usize, String)>,
    /// Every fenced code block: its info string, its text and the line of the opening fence.
    code: Vec<(String, String, usize)>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].bytes().filter(|&b| b == b'\n').count() + 1
}

/// The `{{#include …}}` directives of `text`, skipping escaped ones (`\{{#include`), which mdBook prints as text.
fn includes(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("{{#include") {
        let at = from + i;
        from = at + 2;
        if at > 0 && text.as_bytes()[at - 1] == b'\\' {
            continue;
        }
        let end = text[at..].find("}}").map(|e| at + e).unwrap_or(text.len());
        let arg = text[at + "{{#include".len()..end].trim();
        let path = arg.split(':').next().unwrap_or("").trim().to_string();
        // `{{#include}}` without a path is text to mdBook (its directive needs an argument).
        if !path.is_empty() {
            out.push((line_of(text, at), path));
        }
    }
    out
}

fn parse(text: &str) -> Page {
    let mut page = Page { includes: includes(text), ..Page::default() };
    let mut used = HashSet::new();
    let mut heading: Option<String> = None;
    let mut block: Option<(String, String, usize)> = None;
    for (event, range) in Parser::new_ext(text, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { id, .. }) => {
                heading = Some(String::new());
                if let Some(id) = id {
                    // An explicit `{#id}`: mdBook keeps it as written.
                    used.insert(id.to_string());
                    page.anchors.insert(id.to_string());
                    heading = None;
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(t) = heading.take() {
                    let id = unique(&heading_id(&t), &mut used);
                    page.anchors.insert(id);
                }
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
                if let Some((_, body, _)) = block.as_mut() {
                    body.push_str(&t);
                }
            }
            Event::Start(Tag::Link { dest_url, .. }) | Event::Start(Tag::Image { dest_url, .. }) => {
                page.links.push((line_of(text, range.start), dest_url.to_string()));
            }
            Event::Start(Tag::CodeBlock(kind)) => {
                let info = match kind {
                    pulldown_cmark::CodeBlockKind::Fenced(info) => info.to_string(),
                    pulldown_cmark::CodeBlockKind::Indented => String::new(),
                };
                block = Some((info, String::new(), line_of(text, range.start)));
            }
            Event::End(TagEnd::CodeBlock) => page.code.extend(block.take()),
            _ => {}
        }
    }
    page
}

/// mdBook's `unique_id`.
fn unique(id: &str, used: &mut HashSet<String>) -> String {
    if used.insert(id.to_string()) {
        return id.to_string();
    }
    (1..).map(|n| format!("{id}-{n}")).find(|c| used.insert(c.clone())).unwrap()
}

/// `base/rel` with `.` and `..` resolved lexically (the file need not exist).
fn join(base: &Path, rel: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for c in base.join(rel).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            markdown_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

/// The files checked: the two top-level documents and every page of the book.
fn documents() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md"), root().join("ARCHITECTURE.md")];
    markdown_files(&book_src(), &mut files);
    files.sort();
    files
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

/// Every problem with the links, anchors and includes of `files`, as `file:line: what`.
fn broken_links(files: &[PathBuf]) -> Vec<String> {
    let pages: BTreeMap<PathBuf, Page> =
        files.iter().map(|f| (f.clone(), parse(&std::fs::read_to_string(f).unwrap()))).collect();
    let anchors_of = |p: &Path| -> Option<BTreeSet<String>> {
        if let Some(page) = pages.get(p) {
            return Some(page.anchors.clone());
        }
        std::fs::read_to_string(p).ok().map(|t| parse(&t).anchors)
    };
    let mut bad = Vec::new();
    for (file, page) in &pages {
        let dir = file.parent().unwrap();
        let in_book = file.starts_with(book_src());
        for (line, url) in &page.links {
            let at = format!("{}:{line}", rel(file));
            // Absolute URLs (http:, https:, mailto:) are not checked: the tests run offline.
            if url.contains("://") || url.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = match url.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (url.as_str(), None),
            };
            let target = if path.is_empty() { file.clone() } else { join(dir, path) };
            if !target.exists() {
                bad.push(format!("{at}: `{url}`: no such file {}", rel(&target)));
                continue;
            }
            if in_book && !target.starts_with(book_src()) {
                bad.push(format!(
                    "{at}: `{url}` leaves docs/src, which the built book does not contain (name the file in code, or \
                     link to a page of the book)"
                ));
                continue;
            }
            if let Some(fragment) = fragment {
                if target.extension().is_some_and(|x| x == "md") {
                    let anchors = anchors_of(&target).unwrap_or_default();
                    if !anchors.contains(fragment) {
                        bad.push(format!(
                            "{at}: `{url}`: {} has no heading with id `{fragment}` (its ids: {})",
                            rel(&target),
                            anchors.into_iter().collect::<Vec<_>>().join(", ")
                        ));
                    }
                }
            }
        }
        for (line, path) in &page.includes {
            let target = join(dir, path);
            if !target.is_file() {
                bad.push(format!("{}:{line}: {{{{#include {path}}}}}: no such file {}", rel(file), rel(&target)));
            }
        }
    }
    bad
}

#[test]
fn every_relative_link_anchor_and_include_of_the_documentation_resolves() {
    let files = documents();
    assert!(files.len() > 30, "the book's pages are found: {files:?}");
    let bad = broken_links(&files);
    assert!(bad.is_empty(), "broken links in the documentation:\n{}", bad.join("\n"));
}

#[test]
fn the_checker_finds_a_broken_file_link_a_broken_anchor_and_a_missing_include() {
    // The checker itself on a page made for it: three good references and three broken ones.
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.md");
    let b = dir.path().join("b.md");
    std::fs::write(&b, "# Title\n\n## What `it` computes: S1's eq. 7\n\n## Repeated\n\n## Repeated\n\n## Über größe\n")
        .unwrap();
    std::fs::write(
        &a,
        "# A\n\n[ok](b.md#what-it-computes-s1s-eq-7) [ok](b.md#repeated-1) [ok](b.md#über-größe) [self](#a)\n\n\
         [gone](c.md) [bad anchor](b.md#repeated-2)\n\n```json\n{{#include missing.json}}\n```\n\n\
         `\\{{#include escaped.json}}` [web](https://example.org/x#y)\n",
    )
    .unwrap();
    let bad = broken_links(&[a.clone(), b]);
    assert_eq!(bad.len(), 3, "{bad:#?}");
    assert!(bad[0].contains("`c.md`: no such file"), "{bad:?}");
    assert!(bad[1].contains("no heading with id `repeated-2`"), "{bad:?}");
    assert!(bad[2].contains("{{#include missing.json}}"), "{bad:?}");
}

#[test]
fn every_page_of_the_book_is_in_the_summary() {
    // mdBook renders only the pages SUMMARY.md lists: a page left out is missing from the built book, and every
    // link to it is broken there.
    let summary_path = book_src().join("SUMMARY.md");
    let summary = parse(&std::fs::read_to_string(&summary_path).unwrap());
    let listed: BTreeSet<PathBuf> = summary.links.iter().map(|(_, u)| join(&book_src(), u)).collect();
    let mut pages = Vec::new();
    markdown_files(&book_src(), &mut pages);
    let missing: Vec<String> =
        pages.iter().filter(|p| **p != summary_path && !listed.contains(*p)).map(|p| rel(p)).collect();
    assert!(missing.is_empty(), "pages not in docs/src/SUMMARY.md: {missing:?}");
    assert!(listed.len() >= 40, "{} pages listed", listed.len());
}

#[test]
fn the_request_bodies_the_readme_shows_are_its_example_files() {
    // Each body in the README is preceded by `<!-- example: examples/….json -->` and must equal that file, which
    // tests/api/examples.rs sends to the router: an example edited in one place only fails here.
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let page = parse(&text);
    let mut checked = 0;
    for (line_no, line) in text.lines().enumerate() {
        let Some(path) = line.trim().strip_prefix("<!-- example:").and_then(|r| r.strip_suffix("-->")) else {
            continue;
        };
        let path = path.trim();
        let file: serde_json::Value =
            serde_json::from_slice(&std::fs::read(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}")))
                .unwrap();
        let (_, body, _) =
            page.code.iter().find(|(info, _, at)| info == "json" && *at == line_no + 2).unwrap_or_else(|| {
                panic!("README.md:{}: no ```json block right after the marker of {path}", line_no + 1)
            });
        let shown: serde_json::Value = serde_json::from_str(body)
            .unwrap_or_else(|e| panic!("README.md:{}: the body shown for {path} is not JSON: {e}", line_no + 2));
        assert_eq!(shown, file, "README.md:{}: the body shown differs from {path}", line_no + 2);
        checked += 1;
    }
    assert!(checked >= 4, "{checked} README bodies checked");
}

#[test]
fn every_example_file_the_documentation_names_exists() {
    // `-d @examples/…`, `perfcast predict examples/…` and the like, in code blocks and code spans.
    let mut bad = Vec::new();
    let mut named = 0;
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, line) in text.lines().enumerate() {
            for (at, _) in line.match_indices("examples/") {
                let before = &line[..at];
                if !(before.is_empty() || before.ends_with(['@', ' ', '`', '(', '"'])) {
                    continue; // `…/examples/…` inside another path (e.g. an include's ../../../examples/)
                }
                let path: String = line[at..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'))
                    .collect();
                let path = path.trim_end_matches('.');
                if path.ends_with(".json") {
                    named += 1;
                    if !root().join(path).is_file() {
                        bad.push(format!("{}:{}: {path}", rel(&file), i + 1));
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "example files named in the documentation that do not exist:\n{}", bad.join("\n"));
    assert!(named >= 10, "{named} example files named");
}
