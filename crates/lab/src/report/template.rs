//! The reports' prose (DESIGN.md §4, Reports): each report's words are a template under
//! `crates/lab/templates/`, embedded with `include_str!` and filled here with what the
//! code measured. Why minijinja, see the [parent module](super).
//!
//! The templates' dialect is Jinja's with one environment for all:
//! - block tags (`{% if %}`, `{% for %}`) on a line of their own leave no line behind
//!   (`trim_blocks`, `lstrip_blocks`), and a template's last newline is kept, so the
//!   text reads as the report it renders;
//! - `{% macro %}` is there for a phrase a template repeats;
//! - a name the code did not pass is an error, not an empty string;
//! - nothing is escaped (markdown, not HTML);
//! - a real number prints as Rust's `{}` does (`0.5`, `100`), and two filters format
//!   it: `x | fixed(n)` is `{:.n}` and `x | signed(n)` is `{:+.n}`.

use minijinja::value::Value;
use minijinja::{AutoEscape, Environment, UndefinedBehavior};

use crate::LabError;

fn fixed(x: f64, decimals: usize) -> String {
    format!("{x:.decimals$}")
}

fn signed(x: f64, decimals: usize) -> String {
    format!("{x:+.decimals$}")
}

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(true);
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_formatter(|out, state, value| {
        if value.is_number()
            && !value.is_integer()
            && let Ok(x) = f64::try_from(value.clone())
        {
            return out.write_fmt(format_args!("{x}")).map_err(|e| {
                minijinja::Error::new(minijinja::ErrorKind::WriteFailure, e.to_string())
            });
        }
        minijinja::escape_formatter(out, state, value)
    });
    env.add_filter("fixed", fixed);
    env.add_filter("signed", signed);
    env
}

/// Renders the template `source` (its file name `name`, for errors) with `ctx`, a
/// `minijinja::context!` of the values it names.
pub fn render(name: &str, source: &str, ctx: Value) -> Result<String, LabError> {
    environment()
        .render_named_str(name, source, ctx)
        .map_err(|e| LabError::run(format!("rendering the template {name}"), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::context;

    #[test]
    fn numbers_blocks_and_newlines() {
        let src = "# {{ title }}\n\n{% if quick %}\nquick {{ scale }} {{ n }}\n{% endif %}\n\
                   {% for x in xs %}\n- {{ x | fixed(2) }} {{ x | signed(1) }}\n{% endfor %}\nend\n";
        let out = render(
            "t.md",
            src,
            context! { title => "T <b>", quick => true, scale => 100.0, n => 3, xs => vec![0.5, -1.25] },
        )
        .unwrap();
        assert_eq!(
            out,
            "# T <b>\n\nquick 100 3\n- 0.50 +0.5\n- -1.25 -1.2\nend\n"
        );
    }

    #[test]
    fn a_missing_value_is_an_error() {
        let e = render("t.md", "{{ nothing }}", context! {}).unwrap_err();
        assert!(e.to_string().contains("t.md"), "{e}");
    }
}
