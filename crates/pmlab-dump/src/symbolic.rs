//! A field's values named by the event's own print format: the `%s` argument that passes the
//! field through `__print_symbolic` (KVM's exit reasons, for one), evaluated per record by
//! the same interpreter that prints `pmlab dump`'s lines, so an analysis names codes exactly
//! as the trace's kernel does and needs no table of its own.

use crate::model::Trace;
use crate::printfmt::{split_print_fmt, Env, Expr, Piece, PrintFormat, Spec};

/// The argument of one event's print format that names a field's values, ready to evaluate.
pub struct SymbolicField<'t> {
    arg: Expr,
    spec: Spec,
    env: Env<'t>,
}

/// Whether `e` reads the field at `offset` (through arithmetic, casts and conditionals).
fn reads(e: &Expr, offset: usize) -> bool {
    match e {
        Expr::Field(Some(f)) => f.offset == offset,
        Expr::Binary(_, l, r) => reads(l, offset) || reads(r, offset),
        Expr::Unary(_, x) | Expr::Cast { item: x, .. } => reads(x, offset),
        Expr::Cond(c, a, b) => reads(c, offset) || reads(a, offset) || reads(b, offset),
        _ => false,
    }
}

/// Whether `e` prints the field at `offset` through `__print_symbolic` (in either branch of
/// a conditional: x86's `kvm_exit` picks the VMX or the SVM table by `isa`).
fn names(e: &Expr, offset: usize) -> bool {
    match e {
        Expr::Symbolic { val, .. } => reads(val, offset),
        Expr::Cond(_, a, b) => names(a, offset) || names(b, offset),
        Expr::Cast { item, .. } => names(item, offset),
        _ => false,
    }
}

impl<'t> SymbolicField<'t> {
    /// The first `%s` argument of event `event`'s print format that names `field` through
    /// `__print_symbolic`; None when the event, the field or such an argument is missing, or
    /// the print format does not parse (ftrace text has no print formats).
    pub fn new(trace: &'t Trace, event: u16, field: &str) -> Option<SymbolicField<'t>> {
        let f = trace.formats.get(&event)?;
        let offset = f.field(field)?.offset as usize;
        // Cheap refusal before parsing: text traces' synthetic formats have no print format.
        split_print_fmt(&f.print_fmt)?;
        let pf = PrintFormat::parse(f, trace.long_size).ok()?;
        let (arg, spec) = pf.pieces.into_iter().find_map(|p| match p {
            Piece::Str { spec, arg, .. } if names(&arg, offset) => Some((arg, spec)),
            _ => None,
        })?;
        let env = Env::new(
            trace.endian == crate::model::Endian::Big,
            trace.long_size,
            &trace.kallsyms,
            &trace.printk_formats,
        );
        Some(SymbolicField { arg, spec, env })
    }

    /// The text the print format gives this record's value: the table's name, or the value
    /// in hex (`0x4a`) where the table has no entry for it, as `trace-cmd report` prints it.
    pub fn name(&self, rec: &[u8]) -> String {
        let mut out = Vec::new();
        self.env
            .print_str(&mut out, rec, &self.spec, None, &self.arg);
        String::from_utf8_lossy(&out).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EventFormat, Field, FieldKind};

    fn trace_with(print_fmt: &str) -> Trace {
        let field = |name: &str, offset, size| Field {
            name: name.into(),
            type_name: "unsigned int".into(),
            offset,
            size,
            signed: false,
            kind: FieldKind::Int,
            common: false,
        };
        let mut t = Trace {
            long_size: 8,
            ..Default::default()
        };
        t.formats.insert(
            7,
            EventFormat {
                id: 7,
                system: "kvm".into(),
                name: "kvm_exit".into(),
                fields: vec![field("exit_reason", 8, 4), field("isa", 12, 4)],
                print_fmt: print_fmt.into(),
            },
        );
        t
    }

    fn rec(reason: u32, isa: u32) -> Vec<u8> {
        let mut r = vec![0u8; 16];
        r[8..12].copy_from_slice(&reason.to_le_bytes());
        r[12..16].copy_from_slice(&isa.to_le_bytes());
        r
    }

    #[test]
    fn names_come_from_the_branch_the_record_takes() {
        let t = trace_with(
            r#""reason %s%s", (REC->isa == 1) ? __print_symbolic(REC->exit_reason & 0xffff, { 12, "HLT" }) : __print_symbolic(REC->exit_reason, { 0x078, "hlt" }), """#,
        );
        let s = SymbolicField::new(&t, 7, "exit_reason").unwrap();
        assert_eq!(s.name(&rec(12 | 1 << 31, 1)), "HLT");
        assert_eq!(s.name(&rec(0x78, 2)), "hlt");
        assert_eq!(s.name(&rec(0x4a, 1)), "0x4a");
        assert!(SymbolicField::new(&t, 7, "isa").is_none());
        assert!(SymbolicField::new(&t, 8, "exit_reason").is_none());
        let plain = trace_with(r#""reason %u", REC->exit_reason"#);
        assert!(SymbolicField::new(&plain, 7, "exit_reason").is_none());
    }
}
