#!/usr/bin/env python3
"""An independent implementation of docs/protocol.md 4 (sealed sessions) that writes
Vectors/sealed-sessions.txt from fixed keys, with PyPI's `cryptography` (pip install
cryptography). The Swift implementation is checked against the file by SealedSessionVectorTests;
this script checks that the file follows from the spec alone: run it and diff.

    python3 Vectors/sealed-sessions.py > /tmp/v.txt && diff /tmp/v.txt Vectors/sealed-sessions.txt
"""
import hashlib, hmac, struct
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives import hashes, serialization

RAW = serialization.Encoding.Raw

def pub(priv):
    return X25519PrivateKey.from_private_bytes(priv).public_key().public_bytes(RAW, serialization.PublicFormat.Raw)

def dh(priv, pub_):
    return X25519PrivateKey.from_private_bytes(priv).exchange(X25519PublicKey.from_public_bytes(pub_))

def nonce(n):
    return b"\0" * 4 + struct.pack(">Q", n)

def enc(k, n, ad, p):
    return AESGCM(k).encrypt(nonce(n), p, ad)

def dec(k, n, ad, c):
    return AESGCM(k).decrypt(nonce(n), c, ad)

def hkdf(ck, ikm):
    out = HKDF(hashes.SHA256(), 64, ck, b"").derive(ikm)
    return out[:32], out[32:]

def rekey(k):
    return enc(k, 2**64 - 1, b"", b"\0" * 32)[:32]

class Symmetric:
    def __init__(self):
        name = b"Noise_NK_25519_AESGCM_SHA256"
        self.h = name + b"\0" * (32 - len(name))
        self.ck = self.h
        self.k = None
        self.n = 0
    def mix_hash(self, d):
        self.h = hashlib.sha256(self.h + d).digest()
    def mix_key(self, ikm):
        self.ck, self.k = hkdf(self.ck, ikm)
        self.n = 0
    def encrypt_and_hash(self, p):
        c = enc(self.k, self.n, self.h, p)
        self.n += 1
        self.mix_hash(c)
        return c
    def decrypt_and_hash(self, c):
        p = dec(self.k, self.n, self.h, c)
        self.n += 1
        self.mix_hash(c)
        return p

def varint(v):
    out = b""
    while v >= 0x80:
        out += bytes([v & 0x7F | 0x80])
        v >>= 7
    return out + bytes([v])

def lp(b):
    return varint(len(b)) + b

def message(kind, body):
    return b"\x01" + varint(kind) + varint(len(body)) + body

def u64(v):
    return struct.pack(">Q", v)

def handshake(transport, cid, s_priv, ie_priv, re_priv, join, payload2):
    rs = pub(s_priv)
    prologue = b"inkwire" + bytes([2, transport]) + u64(cid)
    i, r = Symmetric(), Symmetric()
    for st in (i, r):
        st.mix_hash(prologue)
        st.mix_hash(rs)
    ie = pub(ie_priv)
    i.mix_hash(ie)
    i.mix_key(dh(ie_priv, rs))
    m1 = ie + i.encrypt_and_hash(join)
    r.mix_hash(m1[:32])
    r.mix_key(dh(s_priv, m1[:32]))
    assert r.decrypt_and_hash(m1[32:]) == join
    re = pub(re_priv)
    r.mix_hash(re)
    r.mix_key(dh(re_priv, ie))
    m2 = re + r.encrypt_and_hash(payload2)
    i.mix_hash(m2[:32])
    i.mix_key(dh(ie_priv, m2[:32]))
    assert i.decrypt_and_hash(m2[32:]) == payload2
    k1, k2 = hkdf(i.ck, b"")
    assert (k1, k2) == hkdf(r.ck, b"") and i.h == r.h
    return m1, m2, k1, k2, i.h

def transport_packet(phase, cid, pn, key, frame):
    header = bytes([0x20 | phase]) + u64(cid) + struct.pack(">I", pn & 0xFFFFFFFF)
    return header + enc(key, pn, header, frame)

def hx(b):
    return " ".join(f"{x:02x}" for x in b)

S = bytes(range(0x00, 0x20))
IE = bytes(range(0x20, 0x40))
RE = bytes(range(0x40, 0x60))
CID = 0x0123456789ABCDEF
TOKEN = b"iw1.bWF0aHMKdGVhY2hlcgp0ZWFjaGVyCjE5MDAwMDAwMDA.2clxQVQI2YlITXjcOKQYwdUFOwQ3vqYSXghxdhXrEn0"
JOIN = message(1, lp(b"maths") + lp(b"teacher") + bytes([1]) + lp(TOKEN) + varint(42) + b"\x00")
ACCEPTED = message(32, varint(1) + bytes([1]) + varint(0) + bytes([0]))
reset_key = hmac.new(S, b"inkwire stateless reset", "sha256").digest()
RESET_TOKEN = hmac.new(reset_key, u64(CID), "sha256").digest()[:16]

m1, m2, k1, k2, h = handshake(0, CID, S, IE, RE, JOIN, RESET_TOKEN)
initiation = bytes([0x22]) + u64(CID) + m1
response = bytes([0x23]) + u64(CID) + m2
PING = bytes([0x08]) + struct.pack(">I", 1000)
SEG = bytes([0x00]) + struct.pack(">I", 2000) + varint(0) + varint(len(ACCEPTED) << 1 | 1) + ACCEPTED
dev0 = transport_packet(0, CID, 0, k1, PING)
dmn0 = transport_packet(0, CID, 0, k2, SEG)
k1p1, k2p1 = rekey(k1), rekey(k2)
PING2 = bytes([0x08]) + struct.pack(">I", 3000)
dev5 = transport_packet(1, CID, 5, k1p1, PING2)
sm1, sm2, sk1, sk2, sh = handshake(1, 0, S, IE, RE, JOIN, b"")
s_dev0 = bytes([0x20]) + enc(sk1, 0, bytes([0x20]), b"")
s_dmn0 = bytes([0x20]) + enc(sk2, 0, bytes([0x20]), ACCEPTED)

print("""# Sealed sessions (docs/protocol.md 4): fixed keys, every handshake byte, the first sealed
# packets both ways, a key update, a stream session, a reset. Written by
# Vectors/sealed-sessions.py (an independent implementation over PyPI's cryptography) and
# checked by Tests/InkProtocolTests/SealedSessionVectorTests.swift. Hex, one `name: value` a line.
# Keys are raw 32-byte X25519 private keys; frames are docs/protocol.md 4.7 frames.
""")
rows = [
    ("daemon-static-private", S), ("daemon-static-public", pub(S)),
    ("device-ephemeral-private", IE), ("device-ephemeral-public", pub(IE)),
    ("daemon-ephemeral-private", RE), ("daemon-ephemeral-public", pub(RE)),
    ("connection-id", u64(CID)), ("join-message", JOIN), ("reset-token", RESET_TOKEN),
    ("datagram-initiation", initiation), ("datagram-response", response),
    ("datagram-handshake-hash", h), ("datagram-key-device-to-daemon", k1), ("datagram-key-daemon-to-device", k2),
    ("device-frame-0", PING), ("device-packet-0", dev0),
    ("daemon-frame-0", SEG), ("daemon-packet-0", dmn0),
    ("phase1-key-device-to-daemon", k1p1), ("phase1-key-daemon-to-device", k2p1),
    ("device-frame-5", PING2), ("device-packet-5-phase-1", dev5),
    ("stream-initiation", bytes([0x22]) + sm1), ("stream-response", bytes([0x23]) + sm2),
    ("stream-handshake-hash", sh), ("stream-key-device-to-daemon", sk1), ("stream-key-daemon-to-device", sk2),
    ("stream-device-message-0", s_dev0), ("stream-daemon-plaintext-0", ACCEPTED), ("stream-daemon-message-0", s_dmn0),
    ("reset-packet", bytes([0x24]) + u64(CID) + RESET_TOKEN),
    ("notice-key-mismatch", bytes([0x27]) + u64(CID) + bytes([1]) + pub(S)),
    ("key-request", bytes([0x25]) + u64(CID) + b"\0" * 55),
    ("key-reply", bytes([0x26]) + u64(CID) + pub(S)),
]
for name, value in rows:
    print(f"{name}: {hx(value)}")
