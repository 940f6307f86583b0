//! PLACEHOLDER: replaced by live collection.
