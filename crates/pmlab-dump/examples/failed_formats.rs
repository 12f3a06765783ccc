//! Lists this machine's event formats whose print format pmlab's renderer considers unparseable by libtraceevent.
fn main() {
    for sys in std::fs::read_dir("/sys/kernel/tracing/events")
        .unwrap()
        .flatten()
    {
        let Ok(evs) = std::fs::read_dir(sys.path()) else {
            continue;
        };
        for ev in evs.flatten() {
            let p = ev.path().join("format");
            let Ok(t) = std::fs::read_to_string(&p) else {
                continue;
            };
            let mut f = pmlab_trace::format::parse_format(&t).unwrap();
            f.system = sys.file_name().to_string_lossy().into_owned();
            if pmlab_dump::render::print_fmt_fails(&f) {
                println!("{}/{}/format FAILED", f.system, f.name);
            }
        }
    }
}
