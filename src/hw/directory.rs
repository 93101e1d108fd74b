//! The GPUs a deployment knows: the built-in catalog, plus GPUs imported from measurements (MT4G) that add new
//! devices or refine catalog ones (a refined GPU keeps its catalog name and shadows the built-in entry).

use super::catalog::{self, normalize_name};
use super::gpu::GpuSpec;

/// One known GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct KnownGpu {
    pub spec: GpuSpec,
    pub aliases: Vec<String>,
    /// Imported or refined from measurements (not the built-in datasheet entry).
    pub imported: bool,
}

/// Built-in catalog + imported GPUs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuDirectory {
    imported: Vec<KnownGpu>,
}

impl GpuDirectory {
    /// A directory with these imported GPUs (specs with their aliases).
    pub fn new(imported: impl IntoIterator<Item = (GpuSpec, Vec<String>)>) -> GpuDirectory {
        GpuDirectory {
            imported: imported.into_iter().map(|(spec, aliases)| KnownGpu { spec, aliases, imported: true }).collect(),
        }
    }

    fn imported_match(&self, wanted: &str) -> Option<&KnownGpu> {
        self.imported.iter().find(|g| {
            std::iter::once(g.spec.name.as_str())
                .chain(g.aliases.iter().map(String::as_str))
                .any(|n| normalize_name(n) == wanted)
        })
    }

    /// Resolves a name or alias: an imported GPU first (by its name or aliases), then the built-in catalog (an
    /// imported refinement of the catalog GPU found wins). `None` when unknown.
    pub fn lookup(&self, name: &str) -> Option<KnownGpu> {
        let wanted = normalize_name(name);
        if let Some(g) = self.imported_match(&wanted) {
            return Some(g.clone());
        }
        let builtin = catalog::lookup(name)?;
        if let Some(g) = self.imported_match(&normalize_name(&builtin.spec.name)) {
            return Some(g.clone());
        }
        Some(KnownGpu {
            spec: builtin.spec.clone(),
            aliases: builtin.aliases.iter().map(|a| a.to_string()).collect(),
            imported: false,
        })
    }

    /// The spec of a name or alias.
    pub fn spec(&self, name: &str) -> Option<GpuSpec> {
        self.lookup(name).map(|g| g.spec)
    }

    /// Every known GPU: the catalog's (refined ones replaced) and the imported new ones.
    pub fn all(&self) -> Vec<KnownGpu> {
        let mut out: Vec<KnownGpu> = catalog::catalog()
            .iter()
            .map(|g| {
                self.imported_match(&normalize_name(&g.spec.name)).cloned().unwrap_or(KnownGpu {
                    spec: g.spec.clone(),
                    aliases: g.aliases.iter().map(|a| a.to_string()).collect(),
                    imported: false,
                })
            })
            .collect();
        for g in &self.imported {
            if !out.iter().any(|o| o.spec.name == g.spec.name) {
                out.push(g.clone());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imported_gpus_refine_the_catalog_and_add_new_ones() {
        let mut h100 = catalog::lookup("H100").unwrap().spec.clone();
        h100.clock_ghz = 1.755;
        let mut custom = h100.clone();
        custom.name = "lab-gpu".into();
        let dir =
            GpuDirectory::new([(h100, vec!["NVIDIA H100 80GB HBM3".into()]), (custom, vec!["My Lab GPU".into()])]);
        // The refinement shadows the built-in entry under every name.
        assert_eq!(dir.spec("H100").unwrap().clock_ghz, 1.755);
        assert_eq!(dir.spec("NVIDIA H100 80GB HBM3").unwrap().clock_ghz, 1.755);
        assert!(dir.lookup("H100-SXM5-80GB").unwrap().imported);
        assert_eq!(dir.spec("my lab gpu").unwrap().name, "lab-gpu");
        // Untouched catalog GPUs still resolve.
        assert_eq!(dir.spec("Tesla T4").unwrap().name, "T4");
        assert!(!dir.lookup("T4").unwrap().imported);
        assert_eq!(dir.all().len(), catalog::catalog().len() + 1);
        assert!(dir.lookup("RTX 9090").is_none());
    }
}
