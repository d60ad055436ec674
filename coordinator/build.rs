//! The dashboard's pages are built into the binary: this checks that the chart
//! library they use has been installed from the npm registry, and rebuilds when a
//! page changes.

fn main() {
    let web = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/web");
    for file in ["index.html", "app.js", "style.css", "package-lock.json"] {
        println!("cargo:rerun-if-changed={}", web.join(file).display());
    }
    let uplot = web.join("node_modules/uplot/dist/uPlot.iife.min.js");
    println!("cargo:rerun-if-changed={}", uplot.display());
    if !uplot.exists() {
        panic!(
            "{} is missing: the dashboard's chart library comes from the npm registry. \
             Run scripts/setup, or `npm ci` in dashboards/web.",
            uplot.display()
        );
    }
}
