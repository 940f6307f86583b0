//! Label selectors with Kubernetes semantics.
//!
//! An empty selector matches everything. An *absent* selector is not a
//! `LabelSelector` at all: where the API gives absence its own meaning (a
//! NetworkPolicy peer, a Service without selector) the model says so with an
//! `Option` or an enum variant, never with an empty selector.

use std::collections::BTreeSet;

use super::model::{Labels, api_enum};

api_enum! {
    /// The operator of a `matchExpressions` requirement.
    pub enum SelectorOperator {
        In = "In",
        NotIn = "NotIn",
        Exists = "Exists",
        DoesNotExist = "DoesNotExist",
    }
}

/// `matchLabels` and `matchExpressions`; an object matches when it meets all of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct LabelSelector {
    pub match_labels: Labels,
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct LabelSelectorRequirement {
    pub key: String,
    pub operator: SelectorOperator,
    pub values: BTreeSet<String>,
}

/// Why a `matchExpressions` entry is not one the API accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequirementError {
    #[error("operator {0} needs at least one value")]
    MissingValues(SelectorOperator),
    #[error("operator {0} takes no values")]
    UnexpectedValues(SelectorOperator),
}

impl LabelSelector {
    /// A selector of `matchLabels` only (a Service's selector).
    pub fn from_labels(match_labels: Labels) -> Self {
        LabelSelector {
            match_labels,
            match_expressions: Vec::new(),
        }
    }

    /// True when the selector has no terms and so matches everything.
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels
            .iter()
            .all(|(key, value)| labels.get(key) == Some(value))
            && self
                .match_expressions
                .iter()
                .all(|requirement| requirement.matches(labels))
    }
}

impl LabelSelectorRequirement {
    /// Builds a requirement, refusing the combinations the API rejects:
    /// `In`/`NotIn` need values, `Exists`/`DoesNotExist` take none.
    pub fn new(
        key: String,
        operator: SelectorOperator,
        values: BTreeSet<String>,
    ) -> Result<Self, RequirementError> {
        let needs_values = matches!(operator, SelectorOperator::In | SelectorOperator::NotIn);
        if needs_values && values.is_empty() {
            return Err(RequirementError::MissingValues(operator));
        }
        if !needs_values && !values.is_empty() {
            return Err(RequirementError::UnexpectedValues(operator));
        }
        Ok(LabelSelectorRequirement {
            key,
            operator,
            values,
        })
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            SelectorOperator::In => value.is_some_and(|v| self.values.contains(v)),
            // A missing label is "not in" any set, as in Kubernetes.
            SelectorOperator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn requirement(
        key: &str,
        operator: SelectorOperator,
        values: &[&str],
    ) -> LabelSelectorRequirement {
        let values = values.iter().map(|v| v.to_string()).collect();
        LabelSelectorRequirement::new(key.into(), operator, values).unwrap()
    }

    fn expressions(requirements: Vec<LabelSelectorRequirement>) -> LabelSelector {
        LabelSelector {
            match_labels: Labels::new(),
            match_expressions: requirements,
        }
    }

    #[test]
    fn empty_selector_matches_everything() {
        let selector = LabelSelector::default();
        assert!(selector.is_empty());
        assert!(selector.matches(&Labels::new()));
        assert!(selector.matches(&labels(&[("app", "web")])));
    }

    #[test]
    fn match_labels_needs_every_pair() {
        let selector = LabelSelector::from_labels(labels(&[("app", "web"), ("tier", "front")]));
        assert!(selector.matches(&labels(&[("app", "web"), ("tier", "front"), ("x", "y")])));
        assert!(!selector.matches(&labels(&[("app", "web")])));
        assert!(!selector.matches(&labels(&[("app", "web"), ("tier", "back")])));
    }

    #[test]
    fn in_needs_the_label_with_a_listed_value() {
        let selector = expressions(vec![requirement(
            "env",
            SelectorOperator::In,
            &["prod", "qa"],
        )]);
        assert!(selector.matches(&labels(&[("env", "qa")])));
        assert!(!selector.matches(&labels(&[("env", "dev")])));
        assert!(!selector.matches(&Labels::new()));
    }

    #[test]
    fn not_in_matches_when_the_label_is_missing() {
        let selector = expressions(vec![requirement("env", SelectorOperator::NotIn, &["prod"])]);
        assert!(selector.matches(&Labels::new()));
        assert!(selector.matches(&labels(&[("env", "dev")])));
        assert!(!selector.matches(&labels(&[("env", "prod")])));
    }

    #[test]
    fn exists_and_does_not_exist_look_only_at_the_key() {
        let exists = expressions(vec![requirement("canary", SelectorOperator::Exists, &[])]);
        let absent = expressions(vec![requirement(
            "canary",
            SelectorOperator::DoesNotExist,
            &[],
        )]);
        let with = labels(&[("canary", "")]);
        assert!(exists.matches(&with));
        assert!(!exists.matches(&Labels::new()));
        assert!(!absent.matches(&with));
        assert!(absent.matches(&Labels::new()));
    }

    #[test]
    fn labels_and_expressions_must_all_hold() {
        let selector = LabelSelector {
            match_labels: labels(&[("app", "db")]),
            match_expressions: vec![requirement("role", SelectorOperator::In, &["primary"])],
        };
        assert!(selector.matches(&labels(&[("app", "db"), ("role", "primary")])));
        assert!(!selector.matches(&labels(&[("app", "db"), ("role", "replica")])));
        assert!(!selector.matches(&labels(&[("app", "web"), ("role", "primary")])));
    }

    #[test]
    fn requirement_refuses_what_the_api_rejects() {
        let none = BTreeSet::new();
        let some: BTreeSet<String> = ["a".to_string()].into();
        assert!(
            LabelSelectorRequirement::new("k".into(), SelectorOperator::In, none.clone()).is_err()
        );
        assert!(LabelSelectorRequirement::new("k".into(), SelectorOperator::NotIn, none).is_err());
        assert!(
            LabelSelectorRequirement::new("k".into(), SelectorOperator::Exists, some.clone())
                .is_err()
        );
        assert!(
            LabelSelectorRequirement::new("k".into(), SelectorOperator::DoesNotExist, some)
                .is_err()
        );
    }
}
