#!/usr/bin/env python3
"""Apple's own verdicts on a set of signed App Store payloads (JWS), for a parity test of our Swift verifier.

Usage: generate_cases.py OUT_DIR [--fixtures DIR]

1. Builds a throwaway EC P-256 test PKI with the `cryptography` package: a trusted root, an intermediate that
   carries Apple's intermediate marker extension (1.2.840.113635.100.6.2.1) and a leaf that carries Apple's
   leaf marker extension (1.2.840.113635.100.6.11.1), plus many broken variants of them.
2. Signs transactions, renewal infos, app transactions and V2 notifications with them (compact ES256 JWS,
   header {"alg":"ES256","x5c":[leaf, intermediate, root]}), and breaks some on purpose.
3. Adds every signed payload of the shared Apple fixtures (`*.jws`, the `signedPayload` of
   `notification_v2_*_body_*.json`, the JWS inside `api_response_*.json` and inside notifications).
4. Asks Apple's official `app-store-server-library` (`SignedDataVerifier`, online checks off) for its verdict
   on each: "OK", the name of the `VerificationStatus` it raised, or "EXCEPTION:<class>" for anything else.
5. Asks the same library's `ReceiptUtility` for the transaction id it extracts from every receipt of the
   fixtures (`receipt_*.b64`: PKCS#7 app receipts and iOS 6 transaction receipts) and from broken copies of
   them, for a parity test of our local receipt decoder.

Writes OUT_DIR/cases.json. No private key is written anywhere.
"""
from __future__ import annotations

import argparse
import base64
import datetime
import glob
import hashlib
import hmac
import json
import os
import platform
import sys
import time
from importlib import metadata

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature
from cryptography.x509.oid import NameOID

from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.receipt_utility import ReceiptUtility
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, VerificationException

LEAF_MARKER = "1.2.840.113635.100.6.11.1"
INTERMEDIATE_MARKER = "1.2.840.113635.100.6.2.1"
DER_NULL = b"\x05\x00"

BUNDLE_ID = "com.example.app"
APP_APPLE_ID = 1234567890

NOW_MS = int(time.time() * 1000)
NOW = datetime.datetime.fromtimestamp(NOW_MS / 1000, tz=datetime.timezone.utc).replace(microsecond=0)
DAY = datetime.timedelta(days=1)
DAY_MS = 86_400_000
# Payloads are signed a day ago unless a case says otherwise.
SIGNED_MS = NOW_MS - DAY_MS
# A certificate "valid now" stays valid for decades, so that cases.json keeps its meaning for a long time.
LONG = 9000 * DAY

# The order used in the summary line and in the README table.
KINDS = ("transaction", "renewal_info", "notification", "app_transaction")


# ---------------------------------------------------------------------------------------------------------------
# Encoding helpers
# ---------------------------------------------------------------------------------------------------------------

def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64u_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def compact_json(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def ms(dt: datetime.datetime) -> int:
    return int(dt.timestamp() * 1000)


# ---------------------------------------------------------------------------------------------------------------
# Test PKI
# ---------------------------------------------------------------------------------------------------------------

def new_key(curve=None) -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(curve or ec.SECP256R1())


def subject(cn: str) -> x509.Name:
    return x509.Name([
        x509.NameAttribute(NameOID.COMMON_NAME, cn),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "Signed Parity Test"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Example Test PKI"),
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
    ])


def key_usage(**flags) -> x509.KeyUsage:
    names = ("digital_signature", "content_commitment", "key_encipherment", "data_encipherment", "key_agreement",
             "key_cert_sign", "crl_sign", "encipher_only", "decipher_only")
    values = {n: bool(flags.get(n, False)) for n in names}
    return x509.KeyUsage(**values)


CA_USAGE = key_usage(key_cert_sign=True, crl_sign=True)
LEAF_USAGE = key_usage(digital_signature=True)


class Issued:
    """A certificate and its private key (kept in memory only)."""

    def __init__(self, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey):
        self.cert = cert
        self.key = key

    @property
    def der(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.DER)

    @property
    def x5c(self) -> str:
        return b64(self.der)


def issue(cn: str, *, issuer: Issued | None, key=None, not_before=None, not_after=None, ca: bool | None,
          usage: x509.KeyUsage | None, marker: str | None = None, marker_critical=False, marker_value=DER_NULL,
          bc_critical=True, path_length=None, ski=True, aki=True, issuer_name: x509.Name | None = None,
          subject_name: x509.Name | None = None, aki_value: x509.AuthorityKeyIdentifier | None = None) -> Issued:
    """Issues one certificate. issuer=None makes it self-signed. ca=None leaves basicConstraints out.
    subject_name replaces the name made from cn; aki_value replaces the authorityKeyIdentifier naming the signer."""
    key = key or new_key()
    name = subject_name if subject_name is not None else subject(cn)
    signer_key = issuer.key if issuer else key
    signer_name = issuer_name or (issuer.cert.subject if issuer else name)
    builder = (x509.CertificateBuilder()
               .subject_name(name)
               .issuer_name(signer_name)
               .public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(not_before or NOW - 3 * 365 * DAY)
               .not_valid_after(not_after or NOW + LONG))
    if ca is not None:
        builder = builder.add_extension(x509.BasicConstraints(ca=ca, path_length=path_length if ca else None),
                                        critical=bc_critical)
    if usage is not None:
        builder = builder.add_extension(usage, critical=True)
    if ski:
        builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    if aki:
        builder = builder.add_extension(
            aki_value or x509.AuthorityKeyIdentifier.from_issuer_public_key(signer_key.public_key()), critical=False)
    if marker:
        builder = builder.add_extension(
            x509.UnrecognizedExtension(x509.ObjectIdentifier(marker), marker_value), critical=marker_critical)
    cert = builder.sign(signer_key, hashes.SHA256())
    return Issued(cert, key)


def make_root(cn="Parity Test Root CA", *, key=None, not_before=None, not_after=None, marker=None) -> Issued:
    return issue(cn, issuer=None, key=key, not_before=not_before or NOW - 10 * 365 * DAY,
                 not_after=not_after or NOW + LONG + 365 * DAY, ca=True, usage=CA_USAGE, aki=False, marker=marker)


def make_intermediate(root: Issued, cn="Parity Test Intermediate CA", **overrides) -> Issued:
    options = dict(issuer=root, not_before=NOW - 5 * 365 * DAY, not_after=NOW + LONG + 180 * DAY, ca=True,
                   usage=CA_USAGE, path_length=0, marker=INTERMEDIATE_MARKER)
    options.update(overrides)
    return issue(cn, **options)


def make_leaf(intermediate: Issued, cn="Parity Test Receipt Signing", **overrides) -> Issued:
    options = dict(issuer=intermediate, not_before=NOW - 2 * 365 * DAY, not_after=NOW + LONG, ca=False,
                   usage=LEAF_USAGE, marker=LEAF_MARKER)
    options.update(overrides)
    return issue(cn, **options)


# ---------------------------------------------------------------------------------------------------------------
# JWS
# ---------------------------------------------------------------------------------------------------------------

def es_sign(key: ec.EllipticCurvePrivateKey, message: bytes, hash_alg=None, *, der=False, high_s=False) -> bytes:
    """ECDSA signature in JWS form (r||s, each the curve's size) unless der=True."""
    signature = key.sign(message, ec.ECDSA(hash_alg or hashes.SHA256()))
    r, s = decode_dss_signature(signature)
    if high_s:
        order = {256: 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551}[key.curve.key_size]
        s = order - s if s <= order // 2 else s
        signature = encode_dss_signature(r, s)
    if der:
        return signature
    size = (key.curve.key_size + 7) // 8
    return r.to_bytes(size, "big") + s.to_bytes(size, "big")


def sign_jws(payload, key, chain=None, *, header=None, der=False, high_s=False) -> str:
    """A compact ES256 JWS. chain: the x5c list (base64 DER strings); header replaces the default header."""
    if header is None:
        header = {"alg": "ES256", "x5c": list(chain or [])}
    signing_input = b64u(compact_json(header)) + "." + b64u(payload if isinstance(payload, bytes) else compact_json(payload))
    signature = es_sign(key, signing_input.encode("ascii"), der=der, high_s=high_s)
    return signing_input + "." + b64u(signature)


# ---------------------------------------------------------------------------------------------------------------
# Payloads, field names exactly as Apple's JSON
# ---------------------------------------------------------------------------------------------------------------

def transaction(**fields) -> dict:
    purchase = SIGNED_MS - 3_600_000
    body = {
        "transactionId": "2000000812345678",
        "originalTransactionId": "2000000800000001",
        "webOrderLineItemId": "2000000071234567",
        "bundleId": BUNDLE_ID,
        "productId": "com.example.premium.monthly",
        "subscriptionGroupIdentifier": "21345678",
        "purchaseDate": purchase,
        "originalPurchaseDate": purchase - 30 * DAY_MS,
        "expiresDate": purchase + 30 * DAY_MS,
        "quantity": 1,
        "type": "Auto-Renewable Subscription",
        "appAccountToken": "7e3fb20b-4cdb-47cc-936d-99d65f608138",
        "inAppOwnershipType": "PURCHASED",
        "signedDate": SIGNED_MS,
        "environment": "Sandbox",
        "transactionReason": "RENEWAL",
        "storefront": "USA",
        "storefrontId": "143441",
        "price": 4990,
        "currency": "USD",
        "appTransactionId": "704289572311518331",
    }
    return apply(body, fields)


def renewal_info(**fields) -> dict:
    body = {
        "originalTransactionId": "2000000800000001",
        "autoRenewProductId": "com.example.premium.monthly",
        "productId": "com.example.premium.monthly",
        "autoRenewStatus": 1,
        "isInBillingRetryPeriod": False,
        "signedDate": SIGNED_MS,
        "environment": "Sandbox",
        "recentSubscriptionStartDate": SIGNED_MS - 60 * DAY_MS,
        "renewalDate": SIGNED_MS + 29 * DAY_MS,
        "appAccountToken": "7e3fb20b-4cdb-47cc-936d-99d65f608138",
        "appTransactionId": "704289572311518331",
    }
    return apply(body, fields)


def app_transaction(**fields) -> dict:
    body = {
        "receiptType": "Sandbox",
        "appAppleId": APP_APPLE_ID,
        "bundleId": BUNDLE_ID,
        "applicationVersion": "1",
        "versionExternalIdentifier": 0,
        "receiptCreationDate": SIGNED_MS,
        "requestDate": SIGNED_MS,
        "originalApplicationVersion": "1",
        "originalPurchaseDate": SIGNED_MS - 90 * DAY_MS,
        "appTransactionId": "704289572311518331",
        "originalPlatform": "iOS",
    }
    return apply(body, fields)


def notification(signed_transaction: str | None, signed_renewal: str | None = None, data=None, **fields) -> dict:
    body = {
        "notificationType": "DID_RENEW",
        "notificationUUID": "002e14d5-51f5-4503-b5a8-c3a1af68eb20",
        "data": {
            "appAppleId": APP_APPLE_ID,
            "bundleId": BUNDLE_ID,
            "bundleVersion": "1",
            "environment": "Sandbox",
            "status": 1,
        },
        "version": "2.0",
        "signedDate": SIGNED_MS,
    }
    if signed_transaction is not None:
        body["data"]["signedTransactionInfo"] = signed_transaction
    if signed_renewal is not None:
        body["data"]["signedRenewalInfo"] = signed_renewal
    if data is not None:
        body["data"] = apply(body["data"], data)
    return apply(body, fields)


_DROP = object()


def apply(body: dict, fields: dict) -> dict:
    """fields override body; a value of _DROP removes the key."""
    out = dict(body)
    for k, v in fields.items():
        if v is _DROP:
            out.pop(k, None)
        else:
            out[k] = v
    return out


# ---------------------------------------------------------------------------------------------------------------
# Apple's verdict
# ---------------------------------------------------------------------------------------------------------------

METHODS = {
    "transaction": "verify_and_decode_signed_transaction",
    "renewal_info": "verify_and_decode_renewal_info",
    "notification": "verify_and_decode_notification",
    "app_transaction": "verify_and_decode_app_transaction",
}


def apple_verdict(case: dict, strict: bool = True) -> str:
    """Apple's SignedDataVerifier on one case, exactly as the public API is meant to be used (strict=True).
    strict=False additionally turns off the X509_STRICT flag of its private chain verifier, to show which
    rejections come from OpenSSL's strict RFC 5280 profile checks alone."""
    try:
        verifier = SignedDataVerifier(
            root_certificates=[base64.b64decode(r) for r in case["roots"]],
            enable_online_checks=False,
            environment=Environment(case["environment"]),
            bundle_id=case["bundle_id"],
            app_apple_id=case["app_apple_id"],
        )
        if not strict:
            verifier._chain_verifier.enable_strict_checks = False
        getattr(verifier, METHODS[case["kind"]])(case["jws"])
        return "OK"
    except VerificationException as e:
        return e.status.name
    except Exception as e:  # noqa: BLE001 - any other exception is itself a verdict
        return "EXCEPTION:" + type(e).__name__


# ---------------------------------------------------------------------------------------------------------------
# Generated cases
# ---------------------------------------------------------------------------------------------------------------

def generated_cases() -> list[dict]:
    cases: list[dict] = []

    root = make_root()
    inter = make_intermediate(root)
    leaf = make_leaf(inter)
    chain = [leaf.x5c, inter.x5c, root.x5c]
    roots = [root.x5c]

    def add(name, kind, jws, *, env="Sandbox", bundle=BUNDLE_ID, app_id=APP_APPLE_ID, case_roots=None, note=None):
        case = {"name": name, "kind": kind, "jws": jws, "roots": list(roots if case_roots is None else case_roots),
                "bundle_id": bundle, "app_apple_id": app_id, "environment": env, "source": "generated"}
        if note:
            case["note"] = note
        cases.append(case)

    def signed(payload, signer=leaf, x5c=None, **kw):
        return sign_jws(payload, signer.key, chain if x5c is None else x5c, **kw)

    def with_chain(leaf_cert: Issued, inter_cert: Issued = inter, root_cert: Issued = root):
        return [leaf_cert.x5c, inter_cert.x5c, root_cert.x5c]

    tx = signed(transaction())

    # --- valid, one of each kind -------------------------------------------------------------------------------
    add("transaction_valid", "transaction", tx)
    add("renewal_info_valid", "renewal_info", signed(renewal_info()))
    add("notification_valid", "notification", signed(notification(tx, signed(renewal_info()))))
    add("app_transaction_valid", "app_transaction", signed(app_transaction()),
        note="AppTransaction has no signedDate; Apple's library uses receiptCreationDate for the chain's date.")
    add("transaction_production_valid", "transaction", signed(transaction(environment="Production")),
        env="Production")
    add("renewal_info_production_valid", "renewal_info", signed(renewal_info(environment="Production")),
        env="Production")
    add("notification_production_valid", "notification",
        signed(notification(signed(transaction(environment="Production")), data={"environment": "Production"})),
        env="Production")
    add("app_transaction_production_valid", "app_transaction", signed(app_transaction(receiptType="Production")),
        env="Production")

    # --- x5c shape ---------------------------------------------------------------------------------------------
    add("x5c_two_certificates", "transaction", signed(transaction(), x5c=chain[:2]))
    add("x5c_four_certificates", "transaction", signed(transaction(), x5c=chain + [root.x5c]))
    add("x5c_one_certificate", "transaction", signed(transaction(), x5c=chain[:1]))
    add("x5c_empty_list", "transaction", signed(transaction(), x5c=[]))
    add("x5c_missing", "transaction", sign_jws(transaction(), leaf.key, header={"alg": "ES256"}))
    add("x5c_order_swapped", "transaction", signed(transaction(), x5c=[inter.x5c, leaf.x5c, root.x5c]))
    add("x5c_leaf_bad_base64", "transaction", signed(transaction(), x5c=["%%%not base64%%%", inter.x5c, root.x5c]))
    add("x5c_leaf_not_der", "transaction", signed(transaction(), x5c=[b64(b"not a certificate"), inter.x5c, root.x5c]))
    add("x5c_intermediate_bad_base64", "transaction", signed(transaction(), x5c=[leaf.x5c, "%%%", root.x5c]))
    add("x5c_leaf_base64_without_padding", "transaction",
        signed(transaction(), x5c=[leaf.x5c.rstrip("="), inter.x5c, root.x5c]) if leaf.x5c.endswith("=")
        else signed(transaction(), x5c=[leaf.x5c[:-1], inter.x5c, root.x5c]),
        note="x5c entries are standard base64 decoded strictly (validate=True); a truncated/unpadded entry fails.")

    # --- the third certificate ---------------------------------------------------------------------------------
    other_root = make_root("Parity Test Other Root CA")
    add("x5c_third_cert_is_another_root", "transaction", signed(transaction(), x5c=[leaf.x5c, inter.x5c, other_root.x5c]),
        note="x5c[2] is never read: the intermediate is verified against the configured roots only.")
    add("x5c_third_cert_is_garbage", "transaction", signed(transaction(), x5c=[leaf.x5c, inter.x5c, "not even base64 !!!"]),
        note="x5c[2] is not even base64-decoded by Apple's library.")
    reissued_root = make_root(key=root.key)  # same key and name as the trusted root, other bytes (like Apple's mocks)
    add("x5c_third_cert_is_reissued_root_same_key", "transaction",
        signed(transaction(), x5c=[leaf.x5c, inter.x5c, reissued_root.x5c]))
    add("x5c_third_cert_is_leaf", "transaction", signed(transaction(), x5c=[leaf.x5c, inter.x5c, leaf.x5c]))

    # --- trust anchor ------------------------------------------------------------------------------------------
    o_inter = make_intermediate(other_root)
    o_leaf = make_leaf(o_inter)
    add("untrusted_root", "transaction", signed(transaction(), signer=o_leaf, x5c=with_chain(o_leaf, o_inter, other_root)))
    add("untrusted_root_but_x5c2_is_trusted_root", "transaction",
        signed(transaction(), signer=o_leaf, x5c=[o_leaf.x5c, o_inter.x5c, root.x5c]))
    impostor_root = make_root()  # same subject name as the trusted root, another key
    i_inter = make_intermediate(impostor_root)
    i_leaf = make_leaf(i_inter)
    add("impostor_root_same_name_other_key", "transaction",
        signed(transaction(), signer=i_leaf, x5c=with_chain(i_leaf, i_inter, impostor_root)))
    add("no_trusted_roots", "transaction", tx, case_roots=[])
    add("two_trusted_roots_second_matches", "transaction", tx, case_roots=[other_root.x5c, root.x5c])
    add("intermediate_as_trusted_root_only", "transaction", tx, case_roots=[inter.x5c],
        note="Only the intermediate is configured as trusted: OpenSSL needs a self-signed anchor (no partial chains).")

    # --- marker extensions -------------------------------------------------------------------------------------
    l_nomark = make_leaf(inter, marker=None)
    add("leaf_missing_marker_oid", "transaction", signed(transaction(), signer=l_nomark, x5c=with_chain(l_nomark)))
    i_nomark = make_intermediate(root, marker=None)
    l_under_nomark = make_leaf(i_nomark)
    add("intermediate_missing_marker_oid", "transaction",
        signed(transaction(), signer=l_under_nomark, x5c=with_chain(l_under_nomark, i_nomark)))
    l_swapmark = make_leaf(inter, marker=INTERMEDIATE_MARKER)
    add("leaf_carries_intermediate_marker_instead", "transaction",
        signed(transaction(), signer=l_swapmark, x5c=with_chain(l_swapmark)))
    l_crit = make_leaf(inter, marker_critical=True)
    add("leaf_marker_oid_critical", "transaction", signed(transaction(), signer=l_crit, x5c=with_chain(l_crit)),
        note="OpenSSL rejects any unrecognised critical extension.")
    i_crit = make_intermediate(root, marker_critical=True)
    l_under_crit = make_leaf(i_crit)
    add("intermediate_marker_oid_critical", "transaction",
        signed(transaction(), signer=l_under_crit, x5c=with_chain(l_under_crit, i_crit)))
    l_val = make_leaf(inter, marker_value=b"\x0c\x03abc")
    add("leaf_marker_oid_non_null_value", "transaction", signed(transaction(), signer=l_val, x5c=with_chain(l_val)),
        note="Apple's library checks only that the extension is present, not its value.")

    # --- CA flags and key usage --------------------------------------------------------------------------------
    i_notca = make_intermediate(root, ca=False, usage=CA_USAGE)
    l_notca = make_leaf(i_notca)
    add("intermediate_not_ca", "transaction", signed(transaction(), signer=l_notca, x5c=with_chain(l_notca, i_notca)))
    i_nobc = make_intermediate(root, ca=None)
    l_nobc = make_leaf(i_nobc)
    add("intermediate_no_basic_constraints", "transaction", signed(transaction(), signer=l_nobc, x5c=with_chain(l_nobc, i_nobc)))
    i_noksign = make_intermediate(root, usage=key_usage(digital_signature=True))
    l_noksign = make_leaf(i_noksign)
    add("intermediate_without_key_cert_sign", "transaction",
        signed(transaction(), signer=l_noksign, x5c=with_chain(l_noksign, i_noksign)))
    i_noku = make_intermediate(root, usage=None, path_length=None)
    l_noku = make_leaf(i_noku)
    add("intermediate_without_key_usage", "transaction",
        signed(transaction(), signer=l_noku, x5c=with_chain(l_noku, i_noku)),
        note="Accepted by OpenSSL's default checks; rejected only by X509_STRICT (CA without keyUsage).")
    i_bcnc = make_intermediate(root, bc_critical=False)
    l_bcnc = make_leaf(i_bcnc)
    add("intermediate_basic_constraints_not_critical", "transaction",
        signed(transaction(), signer=l_bcnc, x5c=with_chain(l_bcnc, i_bcnc)),
        note="Accepted even with X509_STRICT: the OpenSSL in use does not insist on critical basicConstraints.")
    i_noski = make_intermediate(root, ski=False)
    l_noski = make_leaf(i_noski)
    add("intermediate_without_subject_key_identifier", "transaction",
        signed(transaction(), signer=l_noski, x5c=with_chain(l_noski, i_noski)),
        note="Rejected only by X509_STRICT (a CA must have a subjectKeyIdentifier).")
    l_noaki = make_leaf(inter, aki=False)
    add("leaf_without_authority_key_identifier", "transaction",
        signed(transaction(), signer=l_noaki, x5c=with_chain(l_noaki)),
        note="Rejected only by X509_STRICT (a non-anchor certificate must have an authorityKeyIdentifier).")
    l_empty = make_leaf(inter, subject_name=x509.Name([]))
    add("leaf_empty_subject_without_san", "transaction", signed(transaction(), signer=l_empty, x5c=with_chain(l_empty)),
        note="Rejected only by X509_STRICT (an empty subject name, and no subjectAlternativeName naming the certificate).")
    inter_key_id = x509.SubjectKeyIdentifier.from_public_key(inter.key.public_key()).digest

    def leaf_naming_issuer(key_id=inter_key_id, name=root.cert.subject, serial=inter.cert.serial_number) -> Issued:
        return make_leaf(inter, aki_value=x509.AuthorityKeyIdentifier(key_id, [x509.DirectoryName(name)], serial))
    l_akfull = leaf_naming_issuer()
    add("leaf_authority_key_identifier_with_issuer_and_serial", "transaction",
        signed(transaction(), signer=l_akfull, x5c=with_chain(l_akfull)),
        note="An authorityKeyIdentifier naming the intermediate by key id, its issuer's name and its serial number.")
    for case, leaf_cert in [("leaf_authority_key_id_names_another_key", leaf_naming_issuer(key_id=bytes(20))),
                            ("leaf_authority_serial_names_another_certificate",
                             leaf_naming_issuer(serial=inter.cert.serial_number + 1)),
                            ("leaf_authority_issuer_names_another_name", leaf_naming_issuer(name=inter.cert.subject))]:
        add(case, "transaction", signed(transaction(), signer=leaf_cert, x5c=with_chain(leaf_cert)),
            note="OpenSSL's X509_check_akid: the intermediate is not the issuer the leaf names, so no path is found.")
    i_akid = make_intermediate(root, aki_value=x509.AuthorityKeyIdentifier.from_issuer_public_key(new_key().public_key()))
    l_akid = make_leaf(i_akid)
    add("intermediate_authority_key_id_names_another_key", "transaction",
        signed(transaction(), signer=l_akid, x5c=with_chain(l_akid, i_akid)),
        note="OpenSSL's X509_check_akid: the root is not the issuer the intermediate names.")
    l_ka = make_leaf(inter, usage=key_usage(key_agreement=True))
    add("leaf_key_usage_without_digital_signature", "transaction", signed(transaction(), signer=l_ka, x5c=with_chain(l_ka)),
        note="No purpose is set on the OpenSSL store, so the leaf's keyUsage is not checked.")
    l_kcs = make_leaf(inter, usage=key_usage(digital_signature=True, key_cert_sign=True))
    add("leaf_key_usage_key_cert_sign_not_ca", "transaction", signed(transaction(), signer=l_kcs, x5c=with_chain(l_kcs)),
        note="Rejected only by X509_STRICT (keyCertSign on a non-CA).")
    l_ca = make_leaf(inter, ca=True, usage=CA_USAGE)
    add("leaf_is_ca", "transaction", signed(transaction(), signer=l_ca, x5c=with_chain(l_ca)),
        note="pathLenConstraint 0 on the intermediate does not count the leaf itself, even a CA:true leaf.")
    i_nopl = make_intermediate(root, path_length=None)
    l_ca2 = make_leaf(i_nopl, ca=True, usage=CA_USAGE)
    add("leaf_is_ca_no_path_length_limit", "transaction",
        signed(transaction(), signer=l_ca2, x5c=with_chain(l_ca2, i_nopl)),
        note="A CA:true leaf is not rejected by Apple's library (nothing checks the leaf is an end entity).")
    l_p384 = make_leaf(inter, key=new_key(ec.SECP384R1()))
    p384_input = b64u(compact_json({"alg": "ES256", "x5c": with_chain(l_p384)})) + "." + b64u(compact_json(transaction()))
    p384_sig = l_p384.key.sign(p384_input.encode(), ec.ECDSA(hashes.SHA256()))
    r, s = decode_dss_signature(p384_sig)
    add("leaf_p384_key_with_es256", "transaction", p384_input + "." + b64u(r.to_bytes(48, "big") + s.to_bytes(48, "big")),
        note="PyJWT refuses an ES256 key that is not on P-256.")
    l_byroot = make_leaf(root, cn="Parity Test Leaf Signed By Root")
    add("leaf_signed_directly_by_root", "transaction", signed(transaction(), signer=l_byroot, x5c=with_chain(l_byroot)),
        note="OpenSSL builds [leaf, root]; the root then takes the intermediate's place and lacks its marker.")
    marked_root = make_root("Parity Test Marked Root CA", marker=INTERMEDIATE_MARKER)
    m_leaf = make_leaf(marked_root, cn="Parity Test Leaf Signed By Marked Root")
    add("leaf_signed_directly_by_root_that_carries_intermediate_marker", "transaction",
        signed(transaction(), signer=m_leaf, x5c=[m_leaf.x5c, m_leaf.x5c, marked_root.x5c]),
        case_roots=[marked_root.x5c],
        note="Quirk: Apple's library checks the marker on element [1] of the chain OpenSSL built, so a "
             "two-certificate path is accepted when the root itself carries the intermediate marker.")

    # --- validity dates ----------------------------------------------------------------------------------------
    l_future = make_leaf(inter, not_before=NOW - 10 * DAY, not_after=NOW + LONG)
    add("leaf_not_yet_valid_at_signed_date_valid_now", "transaction",
        signed(transaction(signedDate=NOW_MS - 30 * DAY_MS), signer=l_future, x5c=with_chain(l_future)),
        note="Validity window contains now but not signedDate: checked at signedDate, so rejected.")
    l_short = make_leaf(inter, not_before=NOW - 10 * DAY, not_after=NOW + 365 * DAY)
    add("leaf_expired_at_future_signed_date_valid_now", "transaction",
        signed(transaction(signedDate=NOW_MS + 2 * 365 * DAY_MS), signer=l_short, x5c=with_chain(l_short)))
    add("signed_date_in_future_within_validity", "transaction",
        signed(transaction(signedDate=NOW_MS + 300 * DAY_MS), signer=l_short, x5c=with_chain(l_short)),
        note="Apple's library does not compare signedDate with the clock.")
    l_old = make_leaf(inter, not_before=NOW - 3 * 365 * DAY, not_after=NOW - 365 * DAY)
    add("leaf_valid_at_signed_date_expired_now", "transaction",
        signed(transaction(signedDate=NOW_MS - 2 * 365 * DAY_MS), signer=l_old, x5c=with_chain(l_old)))
    add("leaf_expired_now_no_signed_date", "transaction",
        signed(transaction(signedDate=_DROP), signer=l_old, x5c=with_chain(l_old)),
        note="Without signedDate the chain is checked at the current time.")
    add("leaf_expired_now_signed_date_null", "transaction",
        signed(transaction(signedDate=None), signer=l_old, x5c=with_chain(l_old)))
    add("no_signed_date_valid_now", "transaction", signed(transaction(signedDate=_DROP)))
    add("signed_date_null_valid_now", "transaction", signed(transaction(signedDate=None)))
    add("signed_date_zero", "transaction", signed(transaction(signedDate=0)),
        note="signedDate 0 means 1970-01-01, before every certificate.")
    add("signed_date_fractional_ms", "transaction", signed(transaction(signedDate=SIGNED_MS + 0.7297)),
        note="Fractional milliseconds, as Xcode writes them; Apple truncates to whole seconds.")
    add("signed_date_as_string", "transaction", signed(transaction(signedDate=str(SIGNED_MS))),
        note="Quirk: Apple's library calls int() on signedDate, so a numeric string works.")
    add("leaf_expired_now_signed_date_as_string", "transaction",
        signed(transaction(signedDate=str(NOW_MS - 2 * 365 * DAY_MS)), signer=l_old, x5c=with_chain(l_old)))
    i_old = make_intermediate(root, not_before=NOW - 4 * 365 * DAY, not_after=NOW - 300 * DAY)
    l_under_old = make_leaf(i_old, not_before=NOW - 3 * 365 * DAY, not_after=NOW + LONG)
    add("intermediate_valid_at_signed_date_expired_now", "transaction",
        signed(transaction(signedDate=NOW_MS - 2 * 365 * DAY_MS), signer=l_under_old, x5c=with_chain(l_under_old, i_old)))
    add("intermediate_expired_at_signed_date", "transaction",
        signed(transaction(signedDate=NOW_MS - 10 * DAY_MS), signer=l_under_old, x5c=with_chain(l_under_old, i_old)))
    old_root = make_root("Parity Test Old Root CA", not_before=NOW - 8 * 365 * DAY, not_after=NOW - 100 * DAY)
    or_inter = make_intermediate(old_root, not_before=NOW - 7 * 365 * DAY, not_after=NOW + LONG)
    or_leaf = make_leaf(or_inter, not_before=NOW - 6 * 365 * DAY, not_after=NOW + LONG)
    add("root_valid_at_signed_date_expired_now", "transaction",
        signed(transaction(signedDate=NOW_MS - 365 * DAY_MS), signer=or_leaf, x5c=with_chain(or_leaf, or_inter, old_root)),
        case_roots=[old_root.x5c])
    add("root_expired_at_signed_date", "transaction",
        signed(transaction(signedDate=NOW_MS - 10 * DAY_MS), signer=or_leaf, x5c=with_chain(or_leaf, or_inter, old_root)),
        case_roots=[old_root.x5c], note="The trust anchor's own validity is checked too (OpenSSL).")

    # --- signature and algorithm -------------------------------------------------------------------------------
    good = signed(transaction())
    h, p, sig = good.split(".")
    tampered_payload = b64u(compact_json(transaction(productId="com.example.lifetime")))
    add("tampered_payload", "transaction", h + "." + tampered_payload + "." + sig)
    flipped = bytearray(b64u_decode(p))
    flipped[-2] ^= 0x01  # a byte inside the last JSON string value
    add("tampered_payload_one_bit", "transaction", h + "." + b64u(bytes(flipped)) + "." + sig)
    tampered_header = b64u(compact_json({"alg": "ES256", "x5c": chain, "kid": "x"}))
    add("tampered_header", "transaction", tampered_header + "." + p + "." + sig)
    stranger = new_key()
    add("signed_by_other_key", "transaction", sign_jws(transaction(), stranger, chain))
    add("signed_by_intermediate_key", "transaction", sign_jws(transaction(), inter.key, chain))
    add("alg_none", "transaction", b64u(compact_json({"alg": "none", "x5c": chain})) + "." + p + ".")
    add("alg_none_with_valid_signature_bytes", "transaction",
        b64u(compact_json({"alg": "none", "x5c": chain})) + "." + p + "." + sig)
    hs_input = b64u(compact_json({"alg": "HS256", "x5c": chain})) + "." + p
    hs_key = leaf.cert.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    add("alg_hs256", "transaction",
        hs_input + "." + b64u(hmac.new(hs_key, hs_input.encode(), hashlib.sha256).digest()),
        note="HMAC keyed with the leaf's public key PEM (the classic algorithm-confusion attack).")
    es384_input = b64u(compact_json({"alg": "ES384", "x5c": chain})) + "." + p
    add("alg_es384", "transaction", es384_input + "." + b64u(es_sign(leaf.key, es384_input.encode(), hashes.SHA384())))
    add("alg_lowercase_es256", "transaction", sign_jws(transaction(), leaf.key, header={"alg": "es256", "x5c": chain}))
    add("alg_missing", "transaction", sign_jws(transaction(), leaf.key, header={"x5c": chain}))
    add("header_extra_fields", "transaction",
        sign_jws(transaction(), leaf.key, header={"alg": "ES256", "x5c": chain, "typ": "JWT", "kid": "Apple_Key"}),
        note="typ and kid are ignored.")
    add("signature_der_encoded", "transaction", signed(transaction(), der=True),
        note="JWS ES256 signatures are raw r||s (64 bytes); an ASN.1 DER signature is refused.")
    add("signature_high_s", "transaction", signed(transaction(), high_s=True),
        note="The (r, n-s) twin of a valid signature: plain ECDSA verification accepts it (no low-S rule).")
    add("signature_empty", "transaction", h + "." + p + ".")
    add("signature_truncated", "transaction", h + "." + p + "." + b64u(b64u_decode(sig)[:63]))
    add("signature_with_base64_padding", "transaction", h + "." + p + "." + base64.urlsafe_b64encode(b64u_decode(sig)).decode(),
        note="Quirk: PyJWT accepts '=' padding at the end of a segment.")
    url_sig = sig
    while "-" not in url_sig and "_" not in url_sig:  # ECDSA is randomised: sign until the encoding differs
        url_sig = signed(transaction()).split(".")[2]
    add("signature_standard_base64_alphabet", "transaction",
        h + "." + p + "." + base64.b64encode(b64u_decode(url_sig)).decode().rstrip("="),
        note="'+' and '/' instead of '-' and '_' in the signature segment.")
    last = sig[-1]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    non_canonical = alphabet[alphabet.index(last) | 0b11]  # 86th char: 2 data bits + 4 zero bits
    add("signature_non_canonical_base64", "transaction", h + "." + p + "." + sig[:-1] + non_canonical,
        note="Same signature bytes, but the unused low bits of the last base64 character are set. "
             "Quirk: PyJWT re-encodes each segment and refuses non-canonical base64.")
    add("crit_header_unknown", "transaction",
        sign_jws(transaction(), leaf.key, header={"alg": "ES256", "x5c": chain, "crit": ["exp-ext"], "exp-ext": 1}),
        note="PyJWT rejects a JWS whose crit lists an extension it does not support (RFC 7515 4.1.11).")
    for case, extra, note in [("header_kid_not_a_string", {"kid": 123}, "PyJWT: a kid must be a string."),
                              ("header_kid_null", {"kid": None}, "PyJWT: a kid must be a string."),
                              ("header_b64_false", {"b64": False},
                               "PyJWT: b64 false announces a detached payload; the payload segment must then be empty.")]:
        add(case, "transaction", sign_jws(transaction(), leaf.key, header={"alg": "ES256", "x5c": chain, **extra}), note=note)

    # --- payload form ------------------------------------------------------------------------------------------
    add("payload_not_json", "transaction", sign_jws(b"this is not json", leaf.key, chain))
    add("payload_json_array", "transaction", sign_jws(b"[1,2,3]", leaf.key, chain))
    add("header_not_json", "transaction", b64u(b"{not json") + "." + p + "." + sig)
    add("payload_with_exp_in_past", "transaction", signed(transaction(exp=(NOW_MS - DAY_MS) // 1000)),
        note="Quirk of the Python library: PyJWT enforces registered JWT claims (exp) that Apple never sends.")
    add("payload_with_aud", "transaction", signed(transaction(aud="someone")),
        note="Quirk of the Python library: PyJWT rejects an aud claim when no audience is expected.")
    add("payload_with_nbf_in_future", "transaction", signed(transaction(nbf=(NOW_MS + 10 * DAY_MS) // 1000)),
        note="Quirk of the Python library: PyJWT enforces nbf.")
    for claim in ("exp", "nbf", "iat"):
        add(f"payload_with_{claim}_null", "transaction", signed(transaction(**{claim: None})),
            note="Quirk of the Python library: PyJWT checks a registered claim that is present, and int(None) fails.")
    add("payload_field_wrong_type", "transaction", signed(transaction(quantity="one")),
        note="Quirk of the Python library: the model conversion fails outside the verifier's try block.")
    add("payload_unknown_fields", "transaction", signed(transaction(someFutureField={"a": 1})),
        note="Unknown fields are ignored.")

    # --- bundle, app and environment checks --------------------------------------------------------------------
    add("transaction_wrong_bundle_id", "transaction", signed(transaction(bundleId="com.example.other")))
    add("transaction_bundle_id_case_differs", "transaction", signed(transaction(bundleId="com.example.App")),
        note="The bundle id comparison is exact (case-sensitive).")
    add("transaction_missing_bundle_id", "transaction", signed(transaction(bundleId=_DROP)))
    add("transaction_wrong_environment", "transaction", signed(transaction(environment="Production")))
    add("transaction_missing_environment", "transaction", signed(transaction(environment=_DROP)))
    add("transaction_unknown_environment", "transaction", signed(transaction(environment="Staging")))
    add("transaction_environment_lowercase", "transaction", signed(transaction(environment="sandbox")))
    add("transaction_wrong_bundle_and_environment", "transaction",
        signed(transaction(bundleId="com.example.other", environment="Production")),
        note="The bundle id is checked before the environment.")
    add("transaction_production_config_sandbox_payload", "transaction", tx, env="Production")
    add("transaction_production_foreign_app_apple_id_in_payload", "transaction",
        signed(transaction(environment="Production", appAppleId=999)), env="Production",
        note="Transactions are not checked for appAppleId, even in Production.")
    add("renewal_info_wrong_environment", "renewal_info", signed(renewal_info(environment="Production")))
    add("renewal_info_missing_environment", "renewal_info", signed(renewal_info(environment=_DROP)))
    add("renewal_info_foreign_bundle_id_field", "renewal_info", signed(renewal_info(bundleId="com.example.other")),
        note="Renewal info carries no bundleId in Apple's JSON and none is checked: only the environment is.")
    add("renewal_info_configured_for_other_bundle", "renewal_info", signed(renewal_info()), bundle="com.example.other",
        note="Renewal info is accepted whatever bundle id is configured.")
    add("notification_wrong_bundle_id", "notification", signed(notification(tx, data={"bundleId": "com.example.other"})))
    add("notification_missing_bundle_id", "notification", signed(notification(tx, data={"bundleId": _DROP})))
    add("notification_wrong_environment", "notification", signed(notification(tx, data={"environment": "Production"})))
    add("notification_missing_environment", "notification", signed(notification(tx, data={"environment": _DROP})))
    add("notification_sandbox_wrong_app_apple_id", "notification", signed(notification(tx, data={"appAppleId": 999})),
        note="appAppleId is compared only when the configured environment is Production.")
    add("notification_sandbox_missing_app_apple_id", "notification", signed(notification(tx, data={"appAppleId": _DROP})))
    add("notification_sandbox_config_without_app_apple_id", "notification", signed(notification(tx)), app_id=None)
    prod_tx = signed(transaction(environment="Production"))
    add("notification_production_wrong_app_apple_id", "notification",
        signed(notification(prod_tx, data={"environment": "Production", "appAppleId": 999})), env="Production")
    add("notification_production_missing_app_apple_id", "notification",
        signed(notification(prod_tx, data={"environment": "Production", "appAppleId": _DROP})), env="Production")
    add("notification_production_app_apple_id_as_string", "notification",
        signed(notification(prod_tx, data={"environment": "Production", "appAppleId": str(APP_APPLE_ID)})),
        env="Production", note="The model converts the string to int before comparing.")
    add("notification_wrong_bundle_and_environment", "notification",
        signed(notification(tx, data={"bundleId": "com.example.other", "environment": "Production"})))
    add("notification_without_data", "notification",
        signed(apply(notification(None, notificationType="TEST"), {"data": _DROP})),
        note="No data, summary, externalPurchaseToken or appData: no bundle id to match.")
    add("notification_test_type", "notification",
        signed(apply(notification(None, notificationType="TEST"), {"data": {"bundleId": BUNDLE_ID, "environment": "Sandbox"}})))
    add("notification_summary", "notification", signed(apply(notification(None, notificationType="RENEWAL_EXTENSION",
                                                                          subtype="SUMMARY"), {
        "data": _DROP,
        "summary": {"requestIdentifier": "efb27071-45a4-4aca-9854-2a1e9146f265", "environment": "Sandbox",
                    "appAppleId": APP_APPLE_ID, "bundleId": BUNDLE_ID, "productId": "com.example.premium.monthly",
                    "storefrontCountryCodes": ["USA"], "succeededCount": 5, "failedCount": 0}})))
    add("notification_external_purchase_token", "notification",
        signed(apply(notification(None, notificationType="EXTERNAL_PURCHASE_TOKEN", subtype="UNREPORTED"), {
            "data": _DROP,
            "externalPurchaseToken": {"externalPurchaseId": "SANDBOX_b2158121-7af9-49d4-9561-1f588205523e",
                                      "tokenCreationDate": SIGNED_MS, "appAppleId": APP_APPLE_ID,
                                      "bundleId": BUNDLE_ID}})),
        note="The environment comes from the externalPurchaseId prefix SANDBOX.")
    add("notification_nested_transaction_tampered", "notification",
        signed(notification(h + "." + tampered_payload + "." + sig)),
        note="verify_and_decode_notification does not verify the nested signedTransactionInfo.")
    add("notification_nested_transaction_garbage", "notification", signed(notification("garbage")))
    add("notification_with_unknown_type", "notification", signed(notification(tx, notificationType="FUTURE_TYPE")))
    add("app_transaction_wrong_bundle_id", "app_transaction", signed(app_transaction(bundleId="com.example.other")))
    add("app_transaction_wrong_receipt_type", "app_transaction", signed(app_transaction(receiptType="Production")))
    add("app_transaction_sandbox_wrong_app_apple_id", "app_transaction", signed(app_transaction(appAppleId=999)))
    add("app_transaction_production_wrong_app_apple_id", "app_transaction",
        signed(app_transaction(receiptType="Production", appAppleId=999)), env="Production")
    add("app_transaction_valid_at_receipt_creation_date_expired_now", "app_transaction",
        signed(app_transaction(receiptCreationDate=NOW_MS - 2 * 365 * DAY_MS), signer=l_old, x5c=with_chain(l_old)))
    add("app_transaction_signed_date_preferred_over_receipt_creation_date", "app_transaction",
        signed(app_transaction(receiptCreationDate=NOW_MS - 2 * 365 * DAY_MS, signedDate=NOW_MS - DAY_MS),
               signer=l_old, x5c=with_chain(l_old)),
        note="signedDate wins over receiptCreationDate when both are present.")
    add("transaction_receipt_creation_date_used_without_signed_date", "transaction",
        signed(transaction(signedDate=_DROP, receiptCreationDate=NOW_MS - 2 * 365 * DAY_MS),
               signer=l_old, x5c=with_chain(l_old)),
        note="Quirk: the receiptCreationDate fallback applies to every kind, not just AppTransaction.")
    add("config_production_without_app_apple_id", "transaction", signed(transaction(environment="Production")),
        env="Production", app_id=None, note="The SignedDataVerifier constructor refuses this configuration.")

    # --- Xcode and LocalTesting --------------------------------------------------------------------------------
    xcode_self = issue("StoreKit Testing in Xcode (parity)", issuer=None, ca=None, usage=None, aki=False)
    xtx = transaction(environment="Xcode", transactionId="0", originalTransactionId="0",
                      signedDate=SIGNED_MS + 0.485)
    add("xcode_self_signed_single_cert", "transaction",
        sign_jws(xtx, xcode_self.key, header={"alg": "ES256", "x5c": [xcode_self.x5c], "kid": "Apple_Xcode_Key",
                                              "typ": "JWT"}), env="Xcode")
    add("xcode_unsigned_alg_none", "transaction",
        b64u(compact_json({"alg": "none"})) + "." + b64u(compact_json(xtx)) + ".", env="Xcode",
        note="Environment Xcode: no header, chain or signature check at all.")
    add("xcode_garbage_signature", "transaction",
        b64u(compact_json({"alg": "ES256"})) + "." + b64u(compact_json(xtx)) + "." + b64u(b"garbage"), env="Xcode")
    add("xcode_wrong_bundle_id", "transaction", sign_jws(apply(xtx, {"bundleId": "com.example.other"}), xcode_self.key,
                                                         [xcode_self.x5c]), env="Xcode")
    add("xcode_payload_environment_sandbox", "transaction", signed(transaction()), env="Xcode",
        note="A validly signed Sandbox payload is still refused by an Xcode verifier (environment mismatch).")
    add("xcode_renewal_info_unsigned", "renewal_info",
        b64u(compact_json({"alg": "none"})) + "." + b64u(compact_json(renewal_info(environment="Xcode"))) + ".",
        env="Xcode")
    add("xcode_app_transaction_unsigned", "app_transaction",
        b64u(compact_json({"alg": "none"})) + "." + b64u(compact_json(app_transaction(receiptType="Xcode"))) + ".",
        env="Xcode")
    add("xcode_notification_unsigned", "notification",
        b64u(compact_json({"alg": "none"})) + "." +
        b64u(compact_json(notification(None, data={"environment": "Xcode"}))) + ".", env="Xcode")
    add("xcode_garbage_string", "transaction", "not a jws", env="Xcode")
    add("local_testing_unsigned", "transaction",
        b64u(compact_json({"alg": "none"})) + "." + b64u(compact_json(transaction(environment="LocalTesting"))) + ".",
        env="LocalTesting")
    add("local_testing_payload_xcode", "transaction",
        b64u(compact_json({"alg": "none"})) + "." + b64u(compact_json(xtx)) + ".", env="LocalTesting")
    add("sandbox_config_xcode_style_jws", "transaction",
        sign_jws(apply(xtx, {"environment": "Sandbox"}), xcode_self.key, [xcode_self.x5c]),
        note="Outside Xcode/LocalTesting a single self-signed certificate fails the chain length check.")

    # --- garbage -----------------------------------------------------------------------------------------------
    add("garbage_not_jws", "transaction", "hello world")
    add("garbage_empty_string", "transaction", "")
    add("garbage_bad_base64", "transaction", "!!!.@@@.###")
    add("garbage_two_segments", "transaction", h + "." + p)
    add("garbage_four_segments", "transaction", good + ".AAAA")
    add("garbage_whitespace_around", "transaction", " " + good + "\n",
        note="PyJWT does not strip whitespace; base64 of the segments then fails.")
    add("garbage_notification_not_jws", "notification", "eyJ.eyJ.sig")
    return cases


# ---------------------------------------------------------------------------------------------------------------
# Fixture cases
# ---------------------------------------------------------------------------------------------------------------

def payload_of(jws: str) -> dict:
    try:
        value = json.loads(b64u_decode(jws.split(".")[1]))
        return value if isinstance(value, dict) else {}
    except Exception:  # noqa: BLE001
        return {}


def looks_like_jws(value) -> bool:
    return isinstance(value, str) and value.count(".") == 2 and len(value) > 100 and value.startswith("eyJ")


def nested_jws(value, path=""):
    """(json path, jws) for every JWS string inside a decoded JSON value."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from nested_jws(v, f"{path}.{k}" if path else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from nested_jws(v, f"{path}[{i}]")
    elif looks_like_jws(value):
        yield path, value


def kind_of_field(path: str) -> str:
    leaf = path.rsplit(".", 1)[-1].split("[")[0]
    return {"signedTransactions": "transaction", "signedTransactionInfo": "transaction",
            "signedTransaction": "transaction", "signedRenewalInfo": "renewal_info",
            "signedPayload": "notification", "signedAppTransaction": "app_transaction"}[leaf]


def fixture_cases(fixtures: str) -> list[dict]:
    def der(name):
        with open(os.path.join(fixtures, name), "rb") as f:
            return b64(f.read())

    g3 = der("cert_apple_root_ca_g3.cer")
    test_ca = der("cert_applelib_test_root_ca.der")
    cases: list[dict] = []

    def add(name, kind, jws, roots, bundle, env, app_id, source, note=None):
        case = {"name": name, "kind": kind, "jws": jws, "roots": roots, "bundle_id": bundle, "app_apple_id": app_id,
                "environment": env, "source": source}
        if note:
            case["note"] = note
        cases.append(case)

    def config_for(file: str, jws: str, kind: str):
        """(roots, bundle id, environment, app apple id) as SOURCES.md describes the file."""
        if file.startswith("mock_jws_"):
            return [test_ca], "com.example", "Sandbox", 1234
        if file.startswith("xcode_jws_"):
            return [g3], "com.example.naturelab.backyardbirds.example", "Xcode", None
        body = payload_of(jws)
        data = body.get("data") if isinstance(body.get("data"), dict) else {}
        bundle = body.get("bundleId") or data.get("bundleId")
        env = body.get("environment") or data.get("environment") or "Sandbox"
        app_id = body.get("appAppleId") or data.get("appAppleId")
        if kind == "renewal_info" and not bundle:
            bundle = FIXTURE_BUNDLE.get(file, "com.example.unchecked")
        if bundle is None:
            bundle = FIXTURE_BUNDLE.get(file, "com.example.unchecked")
        if env == "Production" and app_id is None:
            app_id = 0
        return [g3], bundle, env, app_id

    def nested(file, parent_name, container, roots, bundle, env, app_id):
        for path, inner in nested_jws(container):
            kind = kind_of_field(path)
            inner_body = payload_of(inner)
            inner_bundle = inner_body.get("bundleId") or bundle
            add(f"{parent_name}__{path}", kind, inner, roots, inner_bundle, env, app_id, f"fixture:{file}")

    for path in sorted(glob.glob(os.path.join(fixtures, "*.jws"))):
        file = os.path.basename(path)
        with open(path) as f:
            jws = f.read().strip()
        stem = file[:-4]
        if "apptransaction" in file:
            kind = "app_transaction"
        elif "renewalinfo" in file:
            kind = "renewal_info"
        elif "notification" in file:
            kind = "notification"
        else:
            kind = "transaction"
        roots, bundle, env, app_id = config_for(file, jws, kind)
        add(f"fixture_{stem}", kind, jws, roots, bundle, env, app_id, f"fixture:{file}")
        if kind == "notification":
            data = payload_of(jws).get("data")
            if isinstance(data, dict):
                nested(file, f"fixture_{stem}", {"data": data}, roots, bundle, env, app_id)

    for path in sorted(glob.glob(os.path.join(fixtures, "notification_v2_*_body_*.json"))):
        file = os.path.basename(path)
        with open(path) as f:
            body = json.load(f)
        jws = body["signedPayload"]
        stem = file[:-5]
        roots, bundle, env, app_id = config_for(file, jws, "notification")
        add(f"fixture_{stem}__signedPayload", "notification", jws, roots, bundle, env, app_id, f"fixture:{file}")
        data = payload_of(jws).get("data")
        if isinstance(data, dict):
            nested(file, f"fixture_{stem}__signedPayload", {"data": data}, roots, bundle, env, app_id)

    for path in sorted(glob.glob(os.path.join(fixtures, "api_response_*.json"))):
        file = os.path.basename(path)
        with open(path) as f:
            body = json.load(f)
        stem = file[:-5]
        for json_path, jws in nested_jws(body):
            kind = kind_of_field(json_path)
            roots, bundle, env, app_id = config_for(file, jws, kind)
            add(f"fixture_{stem}__{json_path}", kind, jws, roots, bundle, env, app_id, f"fixture:{file}",
                note="Sandbox per SOURCES.md; these 2021 payloads carry no environment field.")

    # The same files under a configuration that must not fit.
    def read(name):
        with open(os.path.join(fixtures, name)) as f:
            return f.read().strip()

    real_tx = "jws_transaction_autorenew_intro_offer_sandbox_gopay.jws"
    add("fixture_cross_real_transaction_with_test_ca_root", "transaction", read(real_tx), [test_ca],
        "Com.VoiceRecording.Telephone", "Sandbox", None, f"fixture:{real_tx}")
    add("fixture_cross_real_transaction_production_config", "transaction", read(real_tx), [g3],
        "Com.VoiceRecording.Telephone", "Production", 1, f"fixture:{real_tx}")
    mock_tx = "mock_jws_transaction_applelib.jws"
    add("fixture_cross_mock_transaction_with_g3_root", "transaction", read(mock_tx), [g3], "com.example", "Sandbox",
        1234, f"fixture:{mock_tx}")
    xcode_tx = "xcode_jws_transaction_autorenew_applelib.jws"
    add("fixture_cross_xcode_transaction_sandbox_config", "transaction", read(xcode_tx), [g3],
        "com.example.naturelab.backyardbirds.example", "Sandbox", None, f"fixture:{xcode_tx}")
    add("fixture_cross_xcode_transaction_local_testing_config", "transaction", read(xcode_tx), [g3],
        "com.example.naturelab.backyardbirds.example", "LocalTesting", None, f"fixture:{xcode_tx}")
    return cases


# Bundle ids for fixtures whose payload has none (only renewal info; Apple does not check it there anyway).
FIXTURE_BUNDLE = {
    "jws_renewalinfo_autorenew_off_voluntary_sandbox_gopay.jws": "Com.VoiceRecording.Telephone",
    "jws_renewalinfo_autorenew_on_sandbox_goiap.jws": "com.example.unchecked",
    "api_response_all_subscription_statuses_expired_sandbox_omnimind.json": "club.omnichess.ios",
}


# Verdicts that must hold whatever else changes; anything else means the harness itself is broken (for example a
# test PKI that no longer verifies, or fixtures that are not where they should be).
SANITY = {
    "transaction_valid": "OK",
    "renewal_info_valid": "OK",
    "notification_valid": "OK",
    "app_transaction_valid": "OK",
    "tampered_payload": "VERIFICATION_FAILURE",
    "untrusted_root": "VERIFICATION_FAILURE",
    "x5c_two_certificates": "INVALID_CHAIN_LENGTH",
    "fixture_jws_transaction_autorenew_intro_offer_sandbox_gopay": "OK",
    "fixture_notification_v2_test_sandbox_body_imdhemy__signedPayload": "OK",
    "fixture_negative_notification_v2_test_x5c_tampered_mimo": "VERIFICATION_FAILURE",
}


# ---------------------------------------------------------------------------------------------------------------

def receipt_cases(fixtures: str) -> list[dict]:
    """Every receipt of the fixtures, and copies broken three ways, with what Apple's `ReceiptUtility` extracts:
    `apple_transaction_id` (null when the receipt holds no in-app purchase) or `apple_error` (the exception)."""
    utility = ReceiptUtility()
    cases = []

    def add(name, kind, data: bytes, source):
        case = {"name": name, "kind": kind, "receipt_data": b64(data), "source": source}
        try:
            if kind == "transaction":
                case["apple_transaction_id"] = utility.extract_transaction_id_from_transaction_receipt(b64(data))
            else:
                case["apple_transaction_id"] = utility.extract_transaction_id_from_app_receipt(b64(data))
        except Exception as error:  # noqa: BLE001 - any refusal is a verdict
            case["apple_error"] = type(error).__name__
        cases.append(case)

    for path in sorted(glob.glob(os.path.join(fixtures, "receipt_*.b64"))):
        name = os.path.basename(path)[:-len(".b64")]
        with open(path, "rb") as f:
            data = base64.b64decode(f.read())
        kind = "transaction" if name.startswith("receipt_ios6_") else "app"
        source = f"fixture:{os.path.basename(path)}"
        add(name, kind, data, source)
        if kind == "app":
            add(f"{name}__truncated_to_half", kind, data[:len(data) // 2], source)
            # The content type pkcs7-signedData (1.2.840.113549.1.7.2) made pkcs7-data (…7.1).
            oid = bytes.fromhex("2a864886f70d010702")
            add(f"{name}__not_signed_data", kind, data.replace(oid, oid[:-1] + b"\x01", 1), source)
        else:
            add(f"{name}__without_purchase_info", kind, data.replace(b'"purchase-info"', b'"purchase-data"'), source)
    return cases


def versions() -> dict:
    out = {}
    for dist in ("app-store-server-library", "cryptography", "pyOpenSSL", "PyJWT", "cattrs"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    try:
        from cryptography.hazmat.backends.openssl import backend
        out["openssl"] = backend.openssl_version_text()
    except Exception:  # noqa: BLE001
        out["openssl"] = None
    out["python"] = platform.python_version()
    return out


def main(argv=None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    default_fixtures = os.environ.get("APPLE_FIXTURES") or os.path.normpath(
        os.path.join(here, "..", "..", "..", "shared", "fixtures", "apple"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--fixtures", default=default_fixtures,
                        help="the shared Apple fixtures (default: <repo>/../shared/fixtures/apple or $APPLE_FIXTURES)")
    parser.add_argument("--markdown", action="store_true",
                        help="also print the case table (name, kind, environment, verdicts) as Markdown, for README.md")
    args = parser.parse_args(argv)

    if not os.path.isfile(os.path.join(args.fixtures, "cert_apple_root_ca_g3.cer")):
        print(f"fixtures not found at {args.fixtures}", file=sys.stderr)
        return 2

    cases = generated_cases() + fixture_cases(args.fixtures)
    names = [c["name"] for c in cases]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise SystemExit(f"duplicate case names: {sorted(duplicates)}")

    ordered = []
    for case in cases:
        case["apple_verdict"] = apple_verdict(case)
        case["apple_verdict_nonstrict"] = apple_verdict(case, strict=False)
        keys = ["name", "kind", "jws", "roots", "bundle_id", "app_apple_id", "environment", "apple_verdict",
                "apple_verdict_nonstrict", "source", "note"]
        ordered.append({k: case[k] for k in keys if k in case})

    verdicts = {c["name"]: c["apple_verdict"] for c in ordered}
    broken = {n: (verdicts.get(n), v) for n, v in SANITY.items() if verdicts.get(n) != v}
    if broken:
        for name, (got, want) in sorted(broken.items()):
            print(f"harness sanity check failed: {name}: Apple said {got}, expected {want}", file=sys.stderr)
        return 3

    os.makedirs(args.out_dir, exist_ok=True)
    receipts = receipt_cases(args.fixtures)
    if not any(r.get("apple_transaction_id") for r in receipts):
        print("harness sanity check failed: Apple's ReceiptUtility read no transaction id from the receipts", file=sys.stderr)
        return 3
    out = {"generated_at": NOW_MS, "library": versions(), "cases": ordered, "receipts": receipts}
    target = os.path.join(args.out_dir, "cases.json")
    with open(target + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    os.replace(target + ".tmp", target)
    if args.markdown:
        print("| case | kind | env | Apple's verdict | without X509_STRICT |")
        print("|---|---|---|---|---|")
        for c in ordered:
            nonstrict = c["apple_verdict_nonstrict"]
            print(f"| `{c['name']}` | {c['kind']} | {c['environment']} | {c['apple_verdict']} | "
                  f"{'same' if nonstrict == c['apple_verdict'] else nonstrict} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
