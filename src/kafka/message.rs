//! Kafka messages declared once each: `message!` turns a
//! struct's fields, each with the versions it is in, into the struct and
//! its decoding and encoding in every version, as Kafka generates its
//! message classes from one JSON schema each.
//!
//! ```text
//! message! {
//!     /// CreateAcls' request (`CreateAclsRequest.json`).
//!     pub struct CreateAclsRequest<'a> {
//!         /// The ACLs to create.
//!         creations: Vec<AclCreation<'a>> [0],
//!     }
//! }
//! ```
//!
//! A field's `[MIN]` (or `[MIN, MAX]`) are the versions it is on the wire
//! in; in another version it decodes to its `= DEFAULT` (else the type's
//! default) and is not written. An `Option` field marked `nullable N` is
//! refused null before version `N` (as the schema's `nullableVersions`). `messages!` makes a
//! struct an API's request or response ([`Message`]) with its key and first
//! flexible version (the schema's `flexibleVersions`): from that version
//! strings, bytes and arrays take their compact forms and every structure
//! ends with `tagged_fields`, skipped when read and written empty.
//!
//! The Rust type says the wire type ([`Field`]): `i8`–`i64` and `bool`;
//! `[u8; 16]` a `uuid`;
//! `&str` or `String` a `string`, `Option` of either a `nullable_string`;
//! `&[u8]` `bytes`; `Vec<T>` an `array` of a declared struct, a string or
//! an `int32`, `Option<Vec<T>>` a nullable one. Decoding keeps every bound of [`super::wire`]: an
//! array's count is checked against the bytes left, at the fewest bytes
//! its element takes in the version decoded (a struct: its fields of that
//! version, and its tags' count when flexible), before anything is
//! allocated.

use super::wire::{self, Decoder, Result};

/// The version a message is read or written in, and whether it is
/// flexible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    /// The API version.
    pub version: i16,
    /// Whether it is at or past the message's first flexible version.
    pub flexible: bool,
}

/// A wire type: how a Rust type is read and written in a version.
pub trait Field<'a>: Sized {
    /// The fewest bytes it takes on the wire in version `v`.
    fn min_bytes(v: Version) -> usize;
    /// Reads one; `what` names it in errors.
    fn get(d: &mut Decoder<'a>, v: Version, what: &str) -> Result<Self>;
    /// Appends it.
    fn put(&self, out: &mut Vec<u8>, v: Version);
}

macro_rules! integer {
    ($($t:ty, $get:ident, $put:ident;)*) => {$(
        impl<'a> Field<'a> for $t {
            fn min_bytes(_: Version) -> usize {
                std::mem::size_of::<$t>()
            }
            fn get(d: &mut Decoder<'a>, _: Version, what: &str) -> Result<$t> {
                d.$get(what)
            }
            fn put(&self, out: &mut Vec<u8>, _: Version) {
                wire::$put(out, *self);
            }
        }
    )*};
}

integer! {
    i8, i8, put_i8;
    i16, i16, put_i16;
    i32, i32, put_i32;
    i64, i64, put_i64;
    bool, bool, put_bool;
}

/// A `uuid`: 16 bytes.
impl<'a> Field<'a> for [u8; 16] {
    fn min_bytes(_: Version) -> usize {
        16
    }
    fn get(d: &mut Decoder<'a>, _: Version, what: &str) -> Result<[u8; 16]> {
        let mut id = [0u8; 16];
        id.copy_from_slice(d.raw(16, what)?);
        Ok(id)
    }
    fn put(&self, out: &mut Vec<u8>, _: Version) {
        out.extend_from_slice(self);
    }
}

impl<'a> Field<'a> for &'a str {
    fn min_bytes(v: Version) -> usize {
        if v.flexible {
            1
        } else {
            2
        }
    }
    fn get(d: &mut Decoder<'a>, v: Version, what: &str) -> Result<&'a str> {
        if v.flexible {
            d.compact_string(what)
        } else {
            d.string(what)
        }
    }
    fn put(&self, out: &mut Vec<u8>, v: Version) {
        if v.flexible {
            wire::put_compact_string(out, self);
        } else {
            wire::put_string(out, self);
        }
    }
}

impl<'a> Field<'a> for Option<&'a str> {
    fn min_bytes(v: Version) -> usize {
        if v.flexible {
            1
        } else {
            2
        }
    }
    fn get(d: &mut Decoder<'a>, v: Version, what: &str) -> Result<Option<&'a str>> {
        if v.flexible {
            d.compact_nullable_string(what)
        } else {
            d.nullable_string(what)
        }
    }
    fn put(&self, out: &mut Vec<u8>, v: Version) {
        if v.flexible {
            wire::put_compact_nullable_string(out, *self);
        } else {
            wire::put_nullable_string(out, *self);
        }
    }
}

impl<'a> Field<'a> for String {
    fn min_bytes(v: Version) -> usize {
        if v.flexible {
            1
        } else {
            2
        }
    }
    fn get(d: &mut Decoder<'a>, v: Version, what: &str) -> Result<String> {
        <&str>::get(d, v, what).map(str::to_owned)
    }
    fn put(&self, out: &mut Vec<u8>, v: Version) {
        self.as_str().put(out, v);
    }
}

impl<'a> Field<'a> for Option<String> {
    fn min_bytes(v: Version) -> usize {
        if v.flexible {
            1
        } else {
            2
        }
    }
    fn get(d: &mut Decoder<'a>, v: Version, what: &str) -> Result<Option<String>> {
        <Option<&str>>::get(d, v, what).map(|s| s.map(str::to_owned))
    }
    fn put(&self, out: &mut Vec<u8>, v: Version) {
        self.as_deref().put(out, v);
    }
}

impl<'a> Field<'a> for &'a [u8] {
    fn min_bytes(v: Version) -> usize {
        length_bytes(v)
    }
    fn get(d: &mut Decoder<'a>, v: Version, what: &str) -> Result<&'a [u8]> {
        if v.flexible {
            d.compact_bytes(what)
        } else {
            d.bytes(what)
        }
    }
    fn put(&self, out: &mut Vec<u8>, v: Version) {
        if v.flexible {
            wire::put_compact_bytes(out, self);
        } else {
            wire::put_bytes(out, self);
        }
    }
}

/// The fewest bytes of a bytes length or an array count in version `v`:
/// a compact form's one-byte varint, else an `int32`.
fn length_bytes(v: Version) -> usize {
    if v.flexible {
        1
    } else {
        4
    }
}

/// A declared struct: an array's element. Strings and `int32`s are
/// elements too (`[]string`, `[]int32`).
pub trait Struct<'a>: Field<'a> {}

impl<'a> Struct<'a> for &'a str {}
impl<'a> Struct<'a> for String {}
impl<'a> Struct<'a> for i32 {}

impl<'a, T: Struct<'a>> Field<'a> for Vec<T> {
    fn min_bytes(v: Version) -> usize {
        length_bytes(v)
    }
    fn get(d: &mut Decoder<'a>, v: Version, what: &str) -> Result<Vec<T>> {
        let n = if v.flexible {
            d.compact_array_len(T::min_bytes(v), what)?
        } else {
            d.array_len(T::min_bytes(v), what)?
        };
        elements(d, n, v, what)
    }
    fn put(&self, out: &mut Vec<u8>, v: Version) {
        put_len(out, self.len(), v);
        for item in self {
            item.put(out, v);
        }
    }
}

impl<'a, T: Struct<'a>> Field<'a> for Option<Vec<T>> {
    fn min_bytes(v: Version) -> usize {
        length_bytes(v)
    }
    fn get(d: &mut Decoder<'a>, v: Version, what: &str) -> Result<Option<Vec<T>>> {
        let n = if v.flexible {
            d.compact_nullable_array_len(T::min_bytes(v), what)?
        } else {
            d.nullable_array_len(T::min_bytes(v), what)?
        };
        n.map(|n| elements(d, n, v, what)).transpose()
    }
    fn put(&self, out: &mut Vec<u8>, v: Version) {
        match self {
            Some(items) => items.put(out, v),
            None if v.flexible => wire::put_uvarint(out, 0),
            None => wire::put_null_array(out),
        }
    }
}

/// `n` elements, the count checked already.
fn elements<'a, T: Field<'a>>(
    d: &mut Decoder<'a>,
    n: usize,
    v: Version,
    what: &str,
) -> Result<Vec<T>> {
    let mut items = Vec::with_capacity(n);
    for _ in 0..n {
        items.push(T::get(d, v, what)?);
    }
    Ok(items)
}

fn put_len(out: &mut Vec<u8>, n: usize, v: Version) {
    if v.flexible {
        wire::put_compact_array_len(out, n);
    } else {
        wire::put_array_len(out, n);
    }
}

/// A top-level message (a request's or a response's body) of one API.
pub trait Message<'a>: Struct<'a> {
    /// The API's key.
    const API_KEY: i16;
    /// The first flexible version.
    const FLEXIBLE: i16;

    /// The version `version` of this API.
    fn version(version: i16) -> Version {
        Version {
            version,
            flexible: version >= Self::FLEXIBLE,
        }
    }

    /// Decodes a body of `version`.
    fn decode(d: &mut Decoder<'a>, version: i16) -> Result<Self> {
        let what = crate::kafka::api_name(Self::API_KEY);
        Self::get(d, Self::version(version), what)
    }

    /// Appends the body in `version`.
    fn encode(&self, version: i16, out: &mut Vec<u8>) {
        self.put(out, Self::version(version));
    }
}

/// Declares a Kafka message struct (see [the module](crate::kafka::message)).
macro_rules! message {
    (
        $(#[$meta:meta])*
        pub struct $name:ident $(<$lt:lifetime>)? {
            $(
                $(#[$fmeta:meta])*
                $field:ident : $ty:ty [$min:tt $(, $max:tt)?] $(nullable $nmin:tt)? $(= $default:expr)?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name $(<$lt>)? {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl<'a> $crate::kafka::message::Field<'a> for $name $(<$lt>)? {
            fn min_bytes(v: $crate::kafka::message::Version) -> usize {
                let mut n = usize::from(v.flexible);
                $(
                    if $crate::kafka::message::message!(@has v [$min $(, $max)?]) {
                        n += <$ty as $crate::kafka::message::Field<'a>>::min_bytes(v);
                    }
                )*
                $crate::kafka::message::at_least_one(n)
            }

            fn get(
                d: &mut $crate::kafka::wire::Decoder<'a>,
                v: $crate::kafka::message::Version,
                what: &str,
            ) -> $crate::kafka::wire::Result<Self> {
                $(
                    let $field: $ty = if $crate::kafka::message::message!(@has v [$min $(, $max)?]) {
                        let what = concat!(stringify!($name), " ", stringify!($field));
                        let value = $crate::kafka::message::Field::get(d, v, what)?;
                        $(
                            if v.version < $nmin && $crate::kafka::message::Null::is_null(&value) {
                                return Err($crate::kafka::wire::DecodeError(format!(
                                    "{what}: null, which only v{} and later may be", $nmin
                                )));
                            }
                        )?
                        value
                    } else {
                        $crate::kafka::message::message!(@default $($default)?)
                    };
                )*
                if v.flexible {
                    d.tagged_fields(what)?;
                }
                Ok($name { $($field,)* })
            }

            fn put(&self, out: &mut Vec<u8>, v: $crate::kafka::message::Version) {
                $(
                    if $crate::kafka::message::message!(@has v [$min $(, $max)?]) {
                        $crate::kafka::message::Field::put(&self.$field, out, v);
                    }
                )*
                if v.flexible {
                    $crate::kafka::wire::put_empty_tagged_fields(out);
                }
            }
        }

        impl<'a> $crate::kafka::message::Struct<'a> for $name $(<$lt>)? {}
    };
    (@has $v:ident [$min:tt]) => { $v.version >= $min };
    (@has $v:ident [$min:tt, $max:tt]) => { ($min..=$max).contains(&$v.version) };
    (@default) => { Default::default() };
    (@default $default:expr) => { $default };
}

/// Whether a decoded field is null: a field that only later versions may
/// make null (`nullable N` in `message!`) is refused before them.
pub trait Null {
    /// Whether it is null.
    fn is_null(&self) -> bool;
}

impl<T> Null for Option<T> {
    fn is_null(&self) -> bool {
        self.is_none()
    }
}

/// The fewest bytes of a struct whose fields (and, flexible, its tags'
/// count) take `n`: at least one, so that a count of empty elements is
/// bounded by the bytes left.
pub const fn at_least_one(n: usize) -> usize {
    if n == 0 {
        1
    } else {
        n
    }
}

/// Implements [`Message`] for declared structs: `Name = API_KEY, flexible`.
macro_rules! messages {
    ($($name:ident $(<$lt:lifetime>)? = $key:expr, $flex:literal;)*) => {$(
        impl<'a> $crate::kafka::message::Message<'a> for $name $(<$lt>)? {
            const API_KEY: i16 = $key;
            const FLEXIBLE: i16 = $flex;
        }
    )*};
}

pub(crate) use {message, messages};
