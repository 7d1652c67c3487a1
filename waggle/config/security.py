"""Security settings from the server and federation files: Kerberos, delegation tokens and TLS.

Hive's own keys are read from ``configuration-properties`` (:class:`~waggle.config.hive_properties.HiveServer`,
:class:`~waggle.config.hive_properties.HiveMetastore`). Waggle Dance's spellings are accepted too, so its files work
as they are. waggle's additions (``tls.*``, ``kerberos.*``, ``delegation-tokens.*``) are ordinary keys.
Problems name the file, the key and the value, like every other setting's.
"""

from __future__ import annotations

import socket

from waggle.config.hive_properties import HiveMetastore as HM
from waggle.config.hive_properties import HiveServer as HS
from waggle.config.hive_values import expand_host
from waggle.config.member_settings import Metastore as M
from waggle.config.model import KerberosServer, MetastoreSecurity, ServerSecurity, TlsClient, TlsServer
from waggle.config.reader import PROPERTIES, Reader, properties
from waggle.config.settings import Server as S


def parse_server_security(r: Reader) -> ServerSecurity:
    p = properties(r)
    kerberos = None
    sasl = p.get(HS.SASL)
    principal_key = HS.PRINCIPAL if p.given(HS.PRINCIPAL.key) else HS.WD_PRINCIPAL
    keytab_key = HS.KEYTAB if p.given(HS.KEYTAB.key) else HS.WD_KEYTAB
    principal_text, keytab = p.get(principal_key), p.get(keytab_key)
    if sasl and not principal_text:
        p.require(HS.PRINCIPAL.key, f" when {HS.SASL.key} is true (or {HS.WD_PRINCIPAL.key})")
    if sasl and not keytab:
        p.require(HS.KEYTAB.key, f" when {HS.SASL.key} is true (or {HS.WD_KEYTAB.key})")
    principal = expand_host(principal_text, socket.getfqdn()) if principal_text else None
    if principal is not None and "@" not in principal:
        p.fail(principal_key.key, principal_text, "expected a principal with a realm, e.g. hive/_HOST@REALM")
        principal = None
    realms = r.get(S.KERBEROS_TRUSTED_REALMS)
    key_file = r.get(S.TOKEN_SIGNING_KEY_FILE)
    qops, rules = p.get(HS.PROTECTION), p.get(HS.AUTH_TO_LOCAL)
    renew, lifetime = p.get(HS.RENEW_INTERVAL), p.get(HS.MAX_LIFETIME)
    if principal and keytab:
        kerberos = KerberosServer(principal=principal, keytab=keytab, sasl=sasl, qops=qops, auth_to_local=rules,
                                  trusted_realms=realms, token_key_file=key_file, token_renew_interval_ms=renew,
                                  token_max_lifetime_ms=lifetime)
    tls = None
    cert, key, client_ca = r.get(S.TLS_CERTIFICATE), r.get(S.TLS_KEY), r.get(S.TLS_CLIENT_CA)
    if cert or key or p.get(HS.USE_SSL):
        if not cert:
            r.require(S.TLS_CERTIFICATE.key, " for TLS on the Thrift port")
        if not key:
            r.require(S.TLS_KEY.key, " for TLS on the Thrift port")
        if cert and key:
            tls = TlsServer(cert, key, client_ca)
    elif client_ca:
        r.fail(S.TLS_CLIENT_CA.key, client_ca, "needs tls.certificate-file and tls.key-file")
    return ServerSecurity(kerberos=kerberos, tls=tls)


def parse_metastore_security(r: Reader) -> MetastoreSecurity:
    p = properties(r)
    principal = None
    if p.get(HM.SASL):
        principal = p.get(HM.PRINCIPAL)
        if not principal:
            p.require(HM.PRINCIPAL.key, f" when {HM.SASL.key} is true")
        elif "@" not in principal:
            p.fail(HM.PRINCIPAL.key, principal, "expected a principal with a realm, e.g. hive/_HOST@REALM")
            principal = None
    client = r.build(TlsClient)  # read, and so checked, whether or not TLS is on
    tls = None
    if r.get(M.TLS_ENABLED) or p.get(HM.USE_SSL):
        if bool(client.certificate_file) != bool(client.key_file):
            r.fail(M.TLS_KEY.key if client.certificate_file else M.TLS_CERTIFICATE.key, None,
                   "a client certificate needs both tls.certificate-file and tls.key-file")
        tls = client
    security = r.build(MetastoreSecurity, principal=principal, qops=p.get(HM.PROTECTION), tls=tls)
    if security.impersonation and not p.get(HM.SASL):
        r.fail(M.IMPERSONATION.key, True, f"needs Kerberos: {PROPERTIES}.{HM.SASL.key}: true")
    return security
