//! The page shell: inline CSS, a few lines of inline JS (click a table row to highlight it),
//! nothing fetched from anywhere (a Content-Security-Policy forbids every network load).

/// Inline style sheet.
pub const CSS: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#222;max-width:960px;margin:24px auto;padding:0 16px;background:#fff}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:32px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:20px 0 6px}.sub{color:#666}
.summary{background:#f3f7fc;border-left:4px solid #1f77b4;padding:8px 16px;margin:16px 0}
.summary li{margin:6px 0}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.hl td{background:#fff3c4}
svg.plot{display:block;max-width:100%;height:auto;margin:8px 0;background:#fff}
svg .grid{stroke:#eee}svg .axis{stroke:#888}svg text{font:11px sans-serif;fill:#333}
svg .label{font-size:12px}svg .ptitle{font-size:13px;font-weight:600}
.skip{color:#8a5a00}.ok{color:#2a7a2a}.fail{color:#b00}
code{background:#f4f4f4;padding:0 3px}
"#;

/// Inline script: clicking a table row toggles its highlight.
pub const JS: &str = "document.querySelectorAll('tbody tr').forEach(function(r){r.addEventListener('click',function(){r.classList.toggle('hl');});});";

/// The whole document around `body`.
pub fn document(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{}</title><style>{CSS}</style></head><body>{body}<script>{JS}</script></body></html>\n",
        super::svg::esc(title)
    )
}
