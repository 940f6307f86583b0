//! Keyword fields: the words the tools print for a closed set of values
//! (`"unicast"`, `"REACHABLE"`, `"forwarding"`).
//!
//! Newer iproute2 versions and kernels add keywords, and some fields print a
//! number when there is no name for it, so every keyword enum keeps what it
//! does not know as `Other(String)` instead of failing or guessing.

/// Defines an enum over a field's keywords with an `Other(String)` variant,
/// built from the printed word by `From<String>` (which serde uses) and shown
/// again by `as_str` and `Display`.
macro_rules! keyword_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident = $word:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Deserialize)]
        #[serde(from = "String")]
        $vis enum $name {
            $( $(#[$variant_meta])* $variant, )*
            /// A word this version of skoop does not know, kept as printed.
            Other(String),
        }

        impl From<String> for $name {
            fn from(word: String) -> Self {
                match word.as_str() {
                    $( $word => $name::$variant, )*
                    _ => $name::Other(word),
                }
            }
        }

        impl From<&str> for $name {
            fn from(word: &str) -> Self {
                $name::from(word.to_owned())
            }
        }

        impl $name {
            /// The word as the tool prints it.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $word, )*
                    $name::Other(word) => word,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(super) use keyword_enum;

#[cfg(test)]
mod tests {
    keyword_enum! {
        enum Colour {
            Red = "red",
            Blue = "blue",
        }
    }

    #[test]
    fn known_word_becomes_its_variant_and_prints_back() {
        let colour = Colour::from("red");
        assert_eq!(colour, Colour::Red);
        assert_eq!(colour.to_string(), "red");
    }

    #[test]
    fn unknown_word_is_kept_as_other() {
        let colour: Colour = serde_json::from_str("\"mauve\"").expect("a JSON string");
        assert_eq!(colour, Colour::Other("mauve".into()));
        assert_eq!(colour.as_str(), "mauve");
    }
}
