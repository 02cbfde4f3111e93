//! The IKEv2 registries: IANA's "Internet Key Exchange Version 2 (IKEv2) Parameters", as
//! RFC 7296 §3 and the RFCs named at each value define them.
//!
//! Each registry is a newtype over its number with a constant per value this project knows,
//! so that a number no constant names still parses and compares (a peer may send one: an
//! unknown status notify is ignored, an unknown transform is skipped), prints as its number,
//! and never needs an `Unknown` variant. [`fmt::Display`] writes the name IANA gives a
//! value, as strongSwan and Wireshark write it, or the number.

use std::fmt;

macro_rules! registry {
    (
        $(#[$meta:meta])*
        $name:ident($repr:ty) {
            $( $(#[$vmeta:meta])* $konst:ident = $value:expr, $text:literal; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub $repr);

        impl $name {
            $( #[doc = concat!("`", $text, "` (", stringify!($value), ").")] $(#[$vmeta])* pub const $konst: $name = $name($value); )*

            /// IANA's name for the value, or `None` for a number this project does not name.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $( $value => Some($text), )*
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{}", self.0),
                }
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => write!(f, "{}({})", stringify!($name), n),
                    None => write!(f, "{}({})", stringify!($name), self.0),
                }
            }
        }

        impl From<$repr> for $name {
            fn from(v: $repr) -> $name {
                $name(v)
            }
        }
    };
}

registry! {
    /// Exchange types (RFC 7296 §3.1).
    ExchangeType(u8) {
        IKE_SA_INIT = 34, "IKE_SA_INIT";
        IKE_AUTH = 35, "IKE_AUTH";
        CREATE_CHILD_SA = 36, "CREATE_CHILD_SA";
        INFORMATIONAL = 37, "INFORMATIONAL";
        /// RFC 5723.
        IKE_SESSION_RESUME = 38, "IKE_SESSION_RESUME";
        /// RFC 9242.
        IKE_INTERMEDIATE = 43, "IKE_INTERMEDIATE";
        /// RFC 9370.
        IKE_FOLLOWUP_KE = 44, "IKE_FOLLOWUP_KE";
    }
}

registry! {
    /// Payload types (RFC 7296 §3.2), the "Next Payload" field's values.
    PayloadType(u8) {
        /// No next payload: the chain ends.
        NONE = 0, "NONE";
        SA = 33, "SA";
        KE = 34, "KE";
        IDI = 35, "IDi";
        IDR = 36, "IDr";
        CERT = 37, "CERT";
        CERTREQ = 38, "CERTREQ";
        AUTH = 39, "AUTH";
        NONCE = 40, "Nonce";
        NOTIFY = 41, "N";
        DELETE = 42, "D";
        VENDOR_ID = 43, "V";
        TSI = 44, "TSi";
        TSR = 45, "TSr";
        /// The encrypted and authenticated payload (§3.14).
        SK = 46, "SK";
        CP = 47, "CP";
        EAP = 48, "EAP";
        /// RFC 7383's encrypted fragment.
        SKF = 53, "SKF";
    }
}

registry! {
    /// Transform types (RFC 7296 §3.3.2; RFC 9370 renamed type 4 "Key Exchange Method").
    TransformType(u8) {
        ENCR = 1, "ENCR";
        PRF = 2, "PRF";
        INTEG = 3, "INTEG";
        /// Diffie-Hellman group, since RFC 9370 "Key Exchange Method".
        KE = 4, "KE";
        /// Extended Sequence Numbers (ESP and AH only).
        ESN = 5, "ESN";
        /// RFC 9370's additional key exchanges, 1 to 7.
        ADDKE1 = 6, "ADDKE1";
        ADDKE2 = 7, "ADDKE2";
        ADDKE3 = 8, "ADDKE3";
        ADDKE4 = 9, "ADDKE4";
        ADDKE5 = 10, "ADDKE5";
        ADDKE6 = 11, "ADDKE6";
        ADDKE7 = 12, "ADDKE7";
    }
}

registry! {
    /// Encryption algorithms (transform type 1).
    EncrId(u16) {
        DES_IV64 = 1, "ENCR_DES_IV64";
        DES = 2, "ENCR_DES";
        TRIPLE_DES = 3, "ENCR_3DES";
        NULL = 11, "ENCR_NULL";
        /// RFC 3602; key length attribute 128, 192 or 256.
        AES_CBC = 12, "ENCR_AES_CBC";
        AES_CTR = 13, "ENCR_AES_CTR";
        AES_CCM_8 = 14, "ENCR_AES_CCM_8";
        AES_CCM_12 = 15, "ENCR_AES_CCM_12";
        AES_CCM_16 = 16, "ENCR_AES_CCM_16";
        AES_GCM_8 = 18, "ENCR_AES_GCM_8";
        AES_GCM_12 = 19, "ENCR_AES_GCM_12";
        /// RFC 4106 (ESP) and RFC 5282 (IKE); key length attribute 128, 192 or 256.
        AES_GCM_16 = 20, "ENCR_AES_GCM_16";
        NULL_AUTH_AES_GMAC = 21, "ENCR_NULL_AUTH_AES_GMAC";
        CAMELLIA_CBC = 23, "ENCR_CAMELLIA_CBC";
        /// RFC 7634; no key length attribute.
        CHACHA20_POLY1305 = 28, "ENCR_CHACHA20_POLY1305";
    }
}

registry! {
    /// Pseudorandom functions (transform type 2).
    PrfId(u16) {
        HMAC_MD5 = 1, "PRF_HMAC_MD5";
        HMAC_SHA1 = 2, "PRF_HMAC_SHA1";
        AES128_XCBC = 4, "PRF_AES128_XCBC";
        /// RFC 4868.
        HMAC_SHA2_256 = 5, "PRF_HMAC_SHA2_256";
        HMAC_SHA2_384 = 6, "PRF_HMAC_SHA2_384";
        HMAC_SHA2_512 = 7, "PRF_HMAC_SHA2_512";
        AES128_CMAC = 8, "PRF_AES128_CMAC";
    }
}

registry! {
    /// Integrity algorithms (transform type 3).
    IntegId(u16) {
        NONE = 0, "NONE";
        HMAC_MD5_96 = 1, "AUTH_HMAC_MD5_96";
        HMAC_SHA1_96 = 2, "AUTH_HMAC_SHA1_96";
        AES_XCBC_96 = 5, "AUTH_AES_XCBC_96";
        AES_CMAC_96 = 8, "AUTH_AES_CMAC_96";
        AES_128_GMAC = 9, "AUTH_AES_128_GMAC";
        AES_192_GMAC = 10, "AUTH_AES_192_GMAC";
        AES_256_GMAC = 11, "AUTH_AES_256_GMAC";
        /// RFC 4868.
        HMAC_SHA2_256_128 = 12, "AUTH_HMAC_SHA2_256_128";
        HMAC_SHA2_384_192 = 13, "AUTH_HMAC_SHA2_384_192";
        HMAC_SHA2_512_256 = 14, "AUTH_HMAC_SHA2_512_256";
    }
}

registry! {
    /// Key exchange methods, formerly Diffie-Hellman groups (transform type 4).
    DhId(u16) {
        NONE = 0, "NONE";
        MODP_768 = 1, "MODP_768";
        MODP_1024 = 2, "MODP_1024";
        MODP_1536 = 5, "MODP_1536";
        /// RFC 3526 group 14.
        MODP_2048 = 14, "MODP_2048";
        MODP_3072 = 15, "MODP_3072";
        MODP_4096 = 16, "MODP_4096";
        MODP_6144 = 17, "MODP_6144";
        MODP_8192 = 18, "MODP_8192";
        /// RFC 5903: P-256, the public value x || y (no SEC1 prefix byte).
        ECP_256 = 19, "ECP_256";
        /// RFC 5903: P-384.
        ECP_384 = 20, "ECP_384";
        ECP_521 = 21, "ECP_521";
        /// RFC 8031: X25519.
        CURVE25519 = 31, "CURVE25519";
        CURVE448 = 32, "CURVE448";
        /// draft-ietf-ipsecme-ikev2-mlkem.
        ML_KEM_512 = 35, "ML_KEM_512";
        ML_KEM_768 = 36, "ML_KEM_768";
        ML_KEM_1024 = 37, "ML_KEM_1024";
    }
}

registry! {
    /// Extended Sequence Numbers (transform type 5).
    EsnId(u16) {
        NO = 0, "NO_ESN";
        YES = 1, "ESN";
    }
}

registry! {
    /// Transform attribute types (RFC 7296 §3.3.5).
    AttributeType(u16) {
        /// Key length in bits, in TV format.
        KEY_LENGTH = 14, "KEY_LENGTH";
    }
}

registry! {
    /// Security protocol identifiers (RFC 7296 §3.3.1).
    ProtocolId(u8) {
        /// Not a protocol: a Notify about the IKE SA carries 0.
        NONE = 0, "NONE";
        IKE = 1, "IKE";
        AH = 2, "AH";
        ESP = 3, "ESP";
    }
}

registry! {
    /// Identification types (RFC 7296 §3.5).
    IdType(u8) {
        IPV4_ADDR = 1, "ID_IPV4_ADDR";
        FQDN = 2, "ID_FQDN";
        RFC822_ADDR = 3, "ID_RFC822_ADDR";
        IPV6_ADDR = 5, "ID_IPV6_ADDR";
        DER_ASN1_DN = 9, "ID_DER_ASN1_DN";
        DER_ASN1_GN = 10, "ID_DER_ASN1_GN";
        KEY_ID = 11, "ID_KEY_ID";
        /// RFC 7619.
        NULL = 13, "ID_NULL";
    }
}

registry! {
    /// Authentication methods (RFC 7296 §3.8).
    AuthMethod(u8) {
        /// RSASSA-PKCS1-v1_5 with SHA-1 (the only hash it allows).
        RSA_SIG = 1, "RSA_SIG";
        /// Shared Key Message Integrity Code: a pre-shared key.
        PSK = 2, "PSK";
        DSS_SIG = 3, "DSS_SIG";
        /// RFC 4754.
        ECDSA_SHA256_P256 = 9, "ECDSA_SHA256_P256";
        ECDSA_SHA384_P384 = 10, "ECDSA_SHA384_P384";
        ECDSA_SHA512_P521 = 11, "ECDSA_SHA512_P521";
        /// RFC 7619.
        NULL = 13, "NULL";
        /// RFC 7427: the signature algorithm as an ASN.1 AlgorithmIdentifier in the data.
        DIGITAL_SIGNATURE = 14, "DIGITAL_SIGNATURE";
    }
}

registry! {
    /// Certificate encodings (RFC 7296 §3.6).
    CertEncoding(u8) {
        PKCS7_X509 = 1, "PKCS7_WRAPPED_X509";
        /// A DER X.509 certificate: what every implementation sends.
        X509_SIGNATURE = 4, "X509_CERTIFICATE_SIGNATURE";
        CRL = 7, "CRL";
        RAW_RSA_KEY = 11, "RAW_RSA_KEY";
        HASH_URL_X509 = 12, "HASH_AND_URL_X509";
        HASH_URL_BUNDLE = 13, "HASH_AND_URL_BUNDLE";
        /// RFC 7670.
        RAW_PUBLIC_KEY = 15, "RAW_PUBLIC_KEY";
    }
}

registry! {
    /// Traffic selector types (RFC 7296 §3.13.1).
    TsType(u8) {
        IPV4_ADDR_RANGE = 7, "TS_IPV4_ADDR_RANGE";
        IPV6_ADDR_RANGE = 8, "TS_IPV6_ADDR_RANGE";
    }
}

registry! {
    /// Configuration payload types (RFC 7296 §3.15).
    CfgType(u8) {
        REQUEST = 1, "CFG_REQUEST";
        REPLY = 2, "CFG_REPLY";
        SET = 3, "CFG_SET";
        ACK = 4, "CFG_ACK";
    }
}

registry! {
    /// Configuration attribute types (RFC 7296 §3.15.1).
    CfgAttributeType(u16) {
        INTERNAL_IP4_ADDRESS = 1, "INTERNAL_IP4_ADDRESS";
        INTERNAL_IP4_NETMASK = 2, "INTERNAL_IP4_NETMASK";
        INTERNAL_IP4_DNS = 3, "INTERNAL_IP4_DNS";
        INTERNAL_IP4_NBNS = 4, "INTERNAL_IP4_NBNS";
        INTERNAL_IP4_DHCP = 6, "INTERNAL_IP4_DHCP";
        APPLICATION_VERSION = 7, "APPLICATION_VERSION";
        INTERNAL_IP6_ADDRESS = 8, "INTERNAL_IP6_ADDRESS";
        INTERNAL_IP6_DNS = 10, "INTERNAL_IP6_DNS";
        INTERNAL_IP6_DHCP = 12, "INTERNAL_IP6_DHCP";
        INTERNAL_IP4_SUBNET = 13, "INTERNAL_IP4_SUBNET";
        SUPPORTED_ATTRIBUTES = 14, "SUPPORTED_ATTRIBUTES";
        INTERNAL_IP6_SUBNET = 15, "INTERNAL_IP6_SUBNET";
    }
}

registry! {
    /// Hash algorithms of RFC 7427's SIGNATURE_HASH_ALGORITHMS notify.
    HashAlgorithm(u16) {
        SHA1 = 1, "SHA1";
        SHA2_256 = 2, "SHA2_256";
        SHA2_384 = 3, "SHA2_384";
        SHA2_512 = 4, "SHA2_512";
        IDENTITY = 5, "IDENTITY";
    }
}

registry! {
    /// Notify message types (RFC 7296 §3.10.1): below 16384 errors, from 16384 status.
    NotifyType(u16) {
        UNSUPPORTED_CRITICAL_PAYLOAD = 1, "UNSUPPORTED_CRITICAL_PAYLOAD";
        INVALID_IKE_SPI = 4, "INVALID_IKE_SPI";
        INVALID_MAJOR_VERSION = 5, "INVALID_MAJOR_VERSION";
        INVALID_SYNTAX = 7, "INVALID_SYNTAX";
        INVALID_MESSAGE_ID = 9, "INVALID_MESSAGE_ID";
        INVALID_SPI = 11, "INVALID_SPI";
        NO_PROPOSAL_CHOSEN = 14, "NO_PROPOSAL_CHOSEN";
        INVALID_KE_PAYLOAD = 17, "INVALID_KE_PAYLOAD";
        AUTHENTICATION_FAILED = 24, "AUTHENTICATION_FAILED";
        SINGLE_PAIR_REQUIRED = 34, "SINGLE_PAIR_REQUIRED";
        NO_ADDITIONAL_SAS = 35, "NO_ADDITIONAL_SAS";
        INTERNAL_ADDRESS_FAILURE = 36, "INTERNAL_ADDRESS_FAILURE";
        FAILED_CP_REQUIRED = 37, "FAILED_CP_REQUIRED";
        TS_UNACCEPTABLE = 38, "TS_UNACCEPTABLE";
        INVALID_SELECTORS = 39, "INVALID_SELECTORS";
        TEMPORARY_FAILURE = 43, "TEMPORARY_FAILURE";
        CHILD_SA_NOT_FOUND = 44, "CHILD_SA_NOT_FOUND";
        INITIAL_CONTACT = 16384, "INITIAL_CONTACT";
        SET_WINDOW_SIZE = 16385, "SET_WINDOW_SIZE";
        ADDITIONAL_TS_POSSIBLE = 16386, "ADDITIONAL_TS_POSSIBLE";
        IPCOMP_SUPPORTED = 16387, "IPCOMP_SUPPORTED";
        NAT_DETECTION_SOURCE_IP = 16388, "NAT_DETECTION_SOURCE_IP";
        NAT_DETECTION_DESTINATION_IP = 16389, "NAT_DETECTION_DESTINATION_IP";
        COOKIE = 16390, "COOKIE";
        USE_TRANSPORT_MODE = 16391, "USE_TRANSPORT_MODE";
        HTTP_CERT_LOOKUP_SUPPORTED = 16392, "HTTP_CERT_LOOKUP_SUPPORTED";
        REKEY_SA = 16393, "REKEY_SA";
        ESP_TFC_PADDING_NOT_SUPPORTED = 16394, "ESP_TFC_PADDING_NOT_SUPPORTED";
        NON_FIRST_FRAGMENTS_ALSO = 16395, "NON_FIRST_FRAGMENTS_ALSO";
        /// RFC 4555.
        MOBIKE_SUPPORTED = 16396, "MOBIKE_SUPPORTED";
        /// RFC 4739.
        MULTIPLE_AUTH_SUPPORTED = 16404, "MULTIPLE_AUTH_SUPPORTED";
        ANOTHER_AUTH_FOLLOWS = 16405, "ANOTHER_AUTH_FOLLOWS";
        /// RFC 5685.
        REDIRECT_SUPPORTED = 16406, "REDIRECT_SUPPORTED";
        /// RFC 6311.
        EAP_ONLY_AUTHENTICATION = 16417, "EAP_ONLY_AUTHENTICATION";
        /// RFC 7383.
        IKEV2_FRAGMENTATION_SUPPORTED = 16430, "IKEV2_FRAGMENTATION_SUPPORTED";
        /// RFC 7427.
        SIGNATURE_HASH_ALGORITHMS = 16431, "SIGNATURE_HASH_ALGORITHMS";
        /// RFC 9242.
        INTERMEDIATE_EXCHANGE_SUPPORTED = 16438, "INTERMEDIATE_EXCHANGE_SUPPORTED";
    }
}

impl NotifyType {
    /// Whether the type is an error (below 16384, RFC 7296 §3.10.1): an error in a response
    /// means the request failed; an unknown status type is ignored.
    pub fn is_error(self) -> bool {
        self.0 < 16384
    }
}

/// The IKE header's flags (RFC 7296 §3.1).
pub mod flags {
    /// The sender is the original initiator of the IKE SA.
    pub const INITIATOR: u8 = 0x08;
    /// The sender can speak a higher major version.
    pub const VERSION: u8 = 0x10;
    /// The message is a response.
    pub const RESPONSE: u8 = 0x20;
}

/// IKEv2's version octet: major 2, minor 0.
pub const VERSION: u8 = 0x20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!(ExchangeType::IKE_AUTH.0, 35);
        assert_eq!(ExchangeType::IKE_AUTH.to_string(), "IKE_AUTH");
        assert_eq!(EncrId(9999).to_string(), "9999");
        assert_eq!(format!("{:?}", DhId::CURVE25519), "DhId(CURVE25519)");
        assert_eq!(format!("{:?}", NotifyType(40000)), "NotifyType(40000)");
        assert!(NotifyType::AUTHENTICATION_FAILED.is_error());
        assert!(!NotifyType::COOKIE.is_error());
        assert_eq!(PayloadType::from(46), PayloadType::SK);
    }
}
