//! The values of a manifest's fields: a literal, `${expr}`, or text with
//! `${expr}` parts, each expression compiled once with the parameters
//! folded in and its calls into `lib/` checked.

use rhai::{Dynamic, Engine, Scope};

use super::Loader;
use super::scripts::Library;
use crate::packs::model::{Template, TemplatePart, Value};
use crate::packs::scope::Context;
use crate::packs::yaml::{self, Node, Pos};

impl Loader<'_> {
    /// Compiles a manifest value: a literal, `${expr}` or a string with `${expr}` parts.
    pub(super) fn value(
        &mut self,
        node: &Node,
        key: &str,
        engine: &Engine,
        compiler: &ExpressionCompiler,
    ) -> Option<Value> {
        let source = match &node.value {
            yaml::Value::String(s) => s.clone(),
            yaml::Value::Int(i) => {
                return Some(literal((*i).into(), i.to_string(), node.pos));
            }
            yaml::Value::Bool(b) => {
                return Some(literal((*b).into(), b.to_string(), node.pos));
            }
            other => {
                self.issues.push(node.pos.issue(format!(
                    "`{key}` must be a string, a number, a boolean or a ${{expression}}, found {}",
                    other.kind()
                )));
                return None;
            }
        };
        let pieces = match split_template(&source) {
            Ok(pieces) => pieces,
            Err(offset) => {
                self.issues.push(
                    self.position_in(node, &source, offset, 1, 1)
                        .issue("`${` without its closing `}`"),
                );
                return None;
            }
        };
        let mut parts = Vec::new();
        let mut ok = true;
        for piece in &pieces {
            match piece {
                Piece::Text(text) => parts.push(TemplatePart::Text(text.clone())),
                Piece::Expression { offset, text } => match compiler.compile(engine, text) {
                    Ok(ast) => parts.push(TemplatePart::Expression(Box::new(ast))),
                    // Its module's own problem is reported already.
                    Err(ExpressionError::InBrokenModule) => ok = false,
                    Err(ExpressionError::Problem { message, position }) => {
                        ok = false;
                        let line = position.line().unwrap_or(1);
                        let column = position.position().unwrap_or(1);
                        let pos = self.position_in(node, &source, *offset, line, column);
                        self.issues
                            .push(pos.issue(format!("in ${{{text}}}: {message}")));
                    }
                },
            }
        }
        if !ok {
            return None;
        }
        let template = match parts.as_slice() {
            [TemplatePart::Expression(ast)] => Template::Expression(ast.clone()),
            [] => Template::Literal(String::new().into()),
            [TemplatePart::Text(text)] => Template::Literal(text.clone().into()),
            _ => Template::Interpolated(parts),
        };
        Some(Value {
            template,
            source,
            pos: node.pos,
        })
    }

    /// The position in the manifest of (`line`, `column`) of an expression
    /// that starts `offset` bytes into the string value of `node`.
    fn position_in(
        &self,
        node: &Node,
        source: &str,
        offset: usize,
        line: usize,
        column: usize,
    ) -> Pos {
        // A quoted scalar's position is its opening quote.
        let quoted = self
            .text
            .lines()
            .nth(node.pos.line.saturating_sub(1))
            .and_then(|l| l.chars().nth(node.pos.column.saturating_sub(1)))
            .is_some_and(|c| c == '"' || c == '\'');
        let before = source.get(..offset).unwrap_or_default().chars().count();
        if line > 1 {
            return Pos {
                line: node.pos.line + line - 1,
                column,
            };
        }
        Pos {
            line: node.pos.line,
            column: node.pos.column + usize::from(quoted) + before + column - 1,
        }
    }
}

fn literal(value: Dynamic, source: String, pos: Pos) -> Value {
    Value {
        template: Template::Literal(value),
        source,
        pos,
    }
}

/// Why an expression did not compile.
enum ExpressionError {
    /// A problem at a position in the expression's text.
    Problem {
        message: String,
        position: rhai::Position,
    },
    /// It calls a `lib/` module that does not compile: not one more problem.
    InBrokenModule,
}

/// Compiles `${...}` expressions with strict variables: the scope's names
/// are declared, and `params` is a constant, so the optimizer folds the
/// parameters into the expression. An expression calling `MODULE::f(...)`
/// of the pack's `lib/` is compiled with that module embedded, as a script
/// importing it, once its call was checked against the module's functions.
pub(super) struct ExpressionCompiler {
    scope: Scope<'static>,
    /// Reads the expression's shape before its modules are imported.
    parser: Engine,
    library: Library,
}

impl ExpressionCompiler {
    pub(super) fn new(params: Dynamic, library: Library) -> Self {
        let mut scope = Scope::new();
        scope.push_constant_dynamic("params", params);
        for name in Context::VARIABLES.iter().filter(|n| **n != "params") {
            scope.push_dynamic(*name, Dynamic::UNIT);
        }
        for name in ["actual", "expected"] {
            scope.push_dynamic(name, Dynamic::UNIT);
        }
        ExpressionCompiler {
            scope,
            parser: crate::packs::sandbox::parser(),
            library,
        }
    }

    fn compile(&self, engine: &Engine, text: &str) -> Result<rhai::AST, ExpressionError> {
        let parse_error = |error: rhai::ParseError| ExpressionError::Problem {
            message: error.0.to_string(),
            position: error.1,
        };
        // One expression: the parser refuses statements.
        let shape = self.parser.compile_expression(text).map_err(parse_error)?;
        self.parameters_declared(&shape)?;
        let modules = self.modules_called(&shape)?;
        if modules.is_empty() {
            return engine
                .compile_expression_with_scope(&self.scope, text)
                .map_err(parse_error);
        }
        // The imports on a line of their own: the expression's own lines
        // are one further down.
        let imports: String = modules
            .iter()
            .map(|m| format!("import \"{m}\" as {m}; "))
            .collect();
        engine
            .compile_into_self_contained(&self.scope, format!("{imports}\n{text}"))
            .map_err(|error| match *error {
                rhai::EvalAltResult::ErrorParsing(kind, position) if position.line() > Some(1) => {
                    let line = position.line().unwrap_or(2) - 1;
                    let column = position.position().unwrap_or(1);
                    ExpressionError::Problem {
                        message: kind.to_string(),
                        position: rhai::Position::new(
                            u16::try_from(line).unwrap_or(u16::MAX),
                            u16::try_from(column).unwrap_or(u16::MAX),
                        ),
                    }
                }
                other => ExpressionError::Problem {
                    message: other.to_string(),
                    position: rhai::Position::NONE,
                },
            })
    }

    /// Every `params.NAME` the expression reads is a parameter the pack
    /// declares: a misspelt one would read as `()` and fail every subject.
    fn parameters_declared(&self, shape: &rhai::AST) -> Result<(), ExpressionError> {
        let declared: rhai::Map = self.scope.get_value("params").unwrap_or_default();
        let mut unknown = None;
        shape.walk(&mut |path: &[rhai::ASTNode]| {
            if let Some(rhai::ASTNode::Expr(rhai::Expr::Dot(dot, ..))) = path.last()
                && let rhai::Expr::Variable(variable, ..) = &dot.lhs
                && variable.1 == "params"
                && variable.2.is_empty()
            {
                // `params.NAME`, or the first link of `params.NAME.more`.
                let property = match &dot.rhs {
                    rhai::Expr::Dot(chain, ..) => &chain.lhs,
                    rhs => rhs,
                };
                if let rhai::Expr::Property(property, position) = property
                    && !declared.contains_key(property.2.as_str())
                {
                    unknown = Some((property.2.to_string(), *position));
                    return false;
                }
            }
            true
        });
        let Some((name, position)) = unknown else {
            return Ok(());
        };
        let mut names: Vec<&str> = declared.keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        Err(ExpressionError::Problem {
            message: format!(
                "params.{name}: the pack has no parameter {name} (its parameters: {})",
                listed(&names)
            ),
            position,
        })
    }

    /// The `lib/` modules the expression calls into, each call checked: a
    /// module the pack has, a function it exports, with that many arguments.
    fn modules_called(&self, ast: &rhai::AST) -> Result<Vec<String>, ExpressionError> {
        let mut calls = Vec::new();
        ast.walk(&mut |path: &[rhai::ASTNode]| {
            // A call alone is a statement, inside an expression an expression.
            let call = match path.last() {
                Some(rhai::ASTNode::Expr(rhai::Expr::FnCall(call, _))) => Some(call),
                Some(rhai::ASTNode::Stmt(rhai::Stmt::FnCall(call, _))) => Some(call),
                _ => None,
            };
            if let Some(call) = call
                && !call.namespace.is_empty()
            {
                calls.push((
                    call.namespace.to_string(),
                    call.namespace.root().to_owned(),
                    call.name.to_string(),
                    call.args.len(),
                    call.namespace.position(),
                ));
            }
            true
        });
        let mut modules = Vec::new();
        for (namespace, root, name, arity, position) in calls {
            let problem = |message: String| Err(ExpressionError::Problem { message, position });
            if self.library.broken.contains(&root) {
                return Err(ExpressionError::InBrokenModule);
            }
            let Some(functions) = self.library.modules.get(&root) else {
                let names: Vec<&str> = self.library.modules.keys().map(String::as_str).collect();
                return problem(format!(
                    "{namespace}::{name}: the pack has no lib/{root}.rhai (its modules: {})",
                    listed(&names)
                ));
            };
            if namespace != root {
                return problem(format!(
                    "{namespace}::{name}: a lib/ module is called as MODULE::function, one level deep"
                ));
            }
            let arities: Vec<usize> = functions
                .iter()
                .filter(|(f, _)| *f == name)
                .map(|(_, a)| *a)
                .collect();
            if arities.is_empty() {
                let mut names: Vec<&str> = functions.iter().map(|(f, _)| f.as_str()).collect();
                names.sort_unstable();
                names.dedup();
                return problem(format!(
                    "lib/{root}.rhai has no function {name} (it has: {})",
                    listed(&names)
                ));
            }
            if !arities.contains(&arity) {
                let takes: Vec<String> = arities.iter().map(ToString::to_string).collect();
                return problem(format!(
                    "{root}::{name} takes {} argument(s), not {arity}",
                    takes.join(" or ")
                ));
            }
            if !modules.contains(&root) {
                modules.push(root);
            }
        }
        Ok(modules)
    }
}

/// Names joined with commas, or `none`.
fn listed(names: &[&str]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

pub(super) enum Piece {
    Text(String),
    /// An expression and its byte offset in the value.
    Expression {
        offset: usize,
        text: String,
    },
}

/// Splits `a ${x + 1} b` into text and expressions; braces inside an
/// expression (`#{a: 1}`) are balanced. `Err` is the offset of an unclosed `${`.
pub(super) fn split_template(source: &str) -> Result<Vec<Piece>, usize> {
    let mut pieces = Vec::new();
    let mut rest = source;
    let mut consumed = 0;
    while let Some(start) = rest.find("${") {
        if start > 0 {
            pieces.push(Piece::Text(rest[..start].to_owned()));
        }
        let body = &rest[start + 2..];
        let mut depth = 1usize;
        let end = body.char_indices().find_map(|(i, c)| {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(i)
        });
        let Some(end) = end else {
            return Err(consumed + start);
        };
        pieces.push(Piece::Expression {
            offset: consumed + start + 2,
            text: body[..end].to_owned(),
        });
        let advance = start + 2 + end + 1;
        consumed += advance;
        rest = &rest[advance..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest.to_owned()));
    }
    Ok(pieces)
}
