//! Links the binaries with an rpath to libtorch's directory (given by torch-sys), so
//! that `xq-trainer` and the tests run without LD_LIBRARY_PATH.

fn main() {
    if let Ok(dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
