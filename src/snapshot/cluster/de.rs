//! Typed deserialization from a document tree, with errors that carry the
//! position and the field path of the offending value.
//!
//! k8s-openapi's types give messages like "invalid type: string \"abc\",
//! expected i32" and no location; reading them from the tree instead of
//! from the parser lets every error say where it is.

use std::fmt;

use serde::de::value::StrDeserializer;
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, Visitor};
use serde::forward_to_deserialize_any;

use super::document::{Data, FieldPath, Position, Segment, Value};

/// A value that does not fit the type asked for.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(super) struct FieldError {
    pub message: String,
    /// Where the offending value is written.
    pub position: Option<Position>,
    /// The path of the offending value within the value deserialized.
    pub path: FieldPath,
}

impl de::Error for FieldError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        FieldError {
            message: message.to_string(),
            position: None,
            path: FieldPath::default(),
        }
    }
}

impl FieldError {
    /// Positions the error at the innermost value it came from.
    fn at(mut self, position: Position) -> Self {
        self.position.get_or_insert(position);
        self
    }

    pub fn within(mut self, segment: Segment) -> Self {
        self.path.prepend(segment);
        self
    }
}

/// Reads a `T` from `value`.
pub(super) fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, FieldError> {
    T::deserialize(ValueDeserializer(value))
}

struct ValueDeserializer<'a>(&'a Value);

impl<'de> de::Deserializer<'de> for ValueDeserializer<'_> {
    type Error = FieldError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        let result = match &self.0.data {
            Data::Null => visitor.visit_unit(),
            Data::Bool(b) => visitor.visit_bool(*b),
            Data::Int(i) => visitor.visit_i64(*i),
            Data::UInt(u) => visitor.visit_u64(*u),
            Data::Float(f) => visitor.visit_f64(*f),
            Data::String(s) => visitor.visit_str(s),
            Data::Seq(items) => visitor.visit_seq(SeqAccess {
                items: items.iter().enumerate(),
            }),
            Data::Map(entries) => visitor.visit_map(MapAccess {
                entries: entries.iter(),
                value: None,
            }),
        };
        result.map_err(|e| e.at(self.0.position))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        let position = self.0.position;
        match self.0.data {
            Data::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
        .map_err(|e| e.at(position))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, FieldError> {
        let position = self.0.position;
        visitor
            .visit_newtype_struct(self)
            .map_err(|e| e.at(position))
    }

    /// Kubernetes enumerations are strings; a unit variant is read from one.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, FieldError> {
        let result = match &self.0.data {
            Data::String(s) => {
                let variant: StrDeserializer<'_, FieldError> = s.as_str().into_deserializer();
                visitor.visit_enum(variant)
            }
            _ => Err(de::Error::invalid_type(unexpected(&self.0.data), &visitor)),
        };
        result.map_err(|e| e.at(self.0.position))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

fn unexpected(data: &Data) -> de::Unexpected<'_> {
    match data {
        Data::Null => de::Unexpected::Unit,
        Data::Bool(b) => de::Unexpected::Bool(*b),
        Data::Int(i) => de::Unexpected::Signed(*i),
        Data::UInt(u) => de::Unexpected::Unsigned(*u),
        Data::Float(f) => de::Unexpected::Float(*f),
        Data::String(s) => de::Unexpected::Str(s),
        Data::Seq(_) => de::Unexpected::Seq,
        Data::Map(_) => de::Unexpected::Map,
    }
}

struct SeqAccess<'a> {
    items: std::iter::Enumerate<std::slice::Iter<'a, Value>>,
}

impl<'de> de::SeqAccess<'de> for SeqAccess<'_> {
    type Error = FieldError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, FieldError> {
        let Some((index, item)) = self.items.next() else {
            return Ok(None);
        };
        seed.deserialize(ValueDeserializer(item))
            .map(Some)
            .map_err(|e| e.within(Segment::Index(index)))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct MapAccess<'a> {
    entries: std::slice::Iter<'a, (String, Value)>,
    /// The entry whose key was just read.
    value: Option<(&'a str, &'a Value)>,
}

impl<'de> de::MapAccess<'de> for MapAccess<'_> {
    type Error = FieldError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, FieldError> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some((key, value));
        let key_deserializer: StrDeserializer<'_, FieldError> = key.as_str().into_deserializer();
        seed.deserialize(key_deserializer).map(Some).map_err(|e| {
            e.at(value.position)
                .within(Segment::Field(key.clone().into()))
        })
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, FieldError> {
        let Some((key, value)) = self.value.take() else {
            return Err(de::Error::custom(
                "a map value was asked for before its key",
            ));
        };
        seed.deserialize(ValueDeserializer(value))
            .map_err(|e| e.within(Segment::Field(key.to_owned().into())))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::cluster::document::parse_yaml;
    use k8s_openapi::api::core::v1::{Pod, Service};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn yaml(text: &str) -> Value {
        let (mut docs, issues) = parse_yaml(text);
        assert!(issues.is_empty(), "{issues:?}");
        docs.remove(0)
    }

    #[test]
    fn wrong_type_names_the_field_path_and_its_position() {
        let doc = yaml(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    ports:\n    - containerPort: \"abc\"\n",
        );
        let err = from_value::<Pod>(&doc).unwrap_err();
        assert_eq!(
            err.path.to_string(),
            "spec.containers[0].ports[0].containerPort"
        );
        assert_eq!(
            err.position,
            Some(Position {
                line: 9,
                column: 22
            })
        );
        assert!(err.message.contains("expected i32"), "{}", err.message);
    }

    #[test]
    fn int_or_string_reads_both_forms() {
        let doc = yaml(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  ports:\n  - port: 80\n    targetPort: http\n  - port: 81\n    targetPort: 8081\n",
        );
        let svc: Service = from_value(&doc).unwrap();
        let ports = svc.spec.unwrap().ports.unwrap();
        assert_eq!(
            ports[0].target_port,
            Some(IntOrString::String("http".into()))
        );
        assert_eq!(ports[1].target_port, Some(IntOrString::Int(8081)));
    }

    #[test]
    fn nulls_and_timestamps_read_as_kubectl_writes_them() {
        let doc = yaml(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  creationTimestamp: \"2024-05-02T09:14:03Z\"\n  name: p\n  deletionTimestamp: null\nstatus:\n  conditions:\n  - lastProbeTime: null\n    status: \"True\"\n    type: Ready\n",
        );
        let pod: Pod = from_value(&doc).unwrap();
        assert!(pod.metadata.creation_timestamp.is_some());
        assert!(pod.metadata.deletion_timestamp.is_none());
    }

    #[test]
    fn unquoted_number_label_is_refused_at_the_label() {
        let doc =
            yaml("apiVersion: v1\nkind: Pod\nmetadata:\n  labels:\n    version: 2\n  name: p\n");
        let err = from_value::<Pod>(&doc).unwrap_err();
        assert_eq!(err.path.to_string(), "metadata.labels.version");
        assert_eq!(
            err.position,
            Some(Position {
                line: 5,
                column: 14
            })
        );
        assert_eq!(err.message, "invalid type: integer `2`, expected a string");
    }
}
