"""Exact decoders for the MySQL column encodings that need more than a ``struct`` format.

Temporal values decode to the text the server itself prints (``"2024-02-29 12:00:00.125"``,
``"-838:59:59"``, ``"0000-00-00"``): Python's ``datetime`` cannot hold zero dates, zero-in-date
values or TIMEs beyond 24 hours, and the text is exact and cheap to turn into any other type.
DECIMAL decodes to ``decimal.Decimal`` keeping every scale digit.
"""

from __future__ import annotations

import functools
import struct
import time
from decimal import Decimal

_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_FLOAT = struct.Struct("<f")
# Zero-padded numbers by lookup: formatting dominates DECIMAL and temporal decoding otherwise.
P2 = tuple(f"{i:02d}" for i in range(100))
Y4 = tuple(f"{i:04d}" for i in range(10000))


def decimal_size(precision: int, scale: int) -> int:
    """Bytes used by a NEWDECIMAL(precision, scale) value."""
    intg = precision - scale
    return (intg // 9) * 4 + _DIG2BYTES[intg % 9] + (scale // 9) * 4 + _DIG2BYTES[scale % 9]


def decimal_lines(precision: int, scale: int, v: str, const) -> list[str]:
    """Straight-line source decoding NEWDECIMAL(precision, scale) at ``buf[pos]`` into ``v``.

    The value is big-endian base-10^9 groups (a shorter group for leftover leading integer and
    trailing fraction digits), the sign in the top bit (set for positive), every bit inverted
    for negatives. One ``struct`` call reads all groups. ``const(value, prefix)`` registers a
    helper in the generated code's namespace and returns its name; the source also needs
    ``_D`` (Decimal), ``_P2`` and ``_Y4`` (the zero-padded number tables).
    """
    if not (0 < precision <= 81 and 0 <= scale <= precision):  # 81: the server's internal maximum
        raise ValueError(f"bad DECIMAL({precision},{scale})")
    intg = precision - scale
    # Groups from the most significant end: (bytes, digits, is_fraction).
    groups: list[tuple[int, int, bool]] = []
    if intg % 9:
        groups.append((_DIG2BYTES[intg % 9], intg % 9, False))
    groups += [(4, 9, False)] * (intg // 9)
    groups += [(4, 9, True)] * (scale // 9)
    if scale % 9:
        groups.append((_DIG2BYTES[scale % 9], scale % 9, True))
    codes, targets, joins = [], [], []
    for n, (nbytes, _, _) in enumerate(groups):
        if nbytes == 3:  # no 3-byte struct code: a byte and a short
            codes.append("BH")
            targets += [f"a{n}", f"b{n}"]
            joins.append(f"g{n} = a{n} << 16 | b{n}")
        else:
            codes.append({1: "B", 2: "H", 4: "I"}[nbytes])
            targets.append(f"g{n}")
    st = const(struct.Struct(">" + "".join(codes)), "_st")
    lines = [f"{', '.join(targets)}{',' if len(targets) == 1 else ''} = {st}.unpack_from(buf, pos)", *joins]
    sign = 1 << (groups[0][0] * 8 - 1)
    lines += [f"if g0 & {sign}:", f"    g0 ^= {sign}", "    s = ''", "else:"]
    lines += [f"    g{n} = {(1 << (nbytes * 8)) - 1} - g{n}" for n, (nbytes, _, _) in enumerate(groups)]
    lines += [f"    g0 ^= {sign}", "    s = '-'"]
    checks = [f"g{n} > {10**digits - 1}" for n, (_, digits, _) in enumerate(groups)]
    lines += [f"if {' or '.join(checks)}:", "    raise ValueError('DECIMAL digit group out of range')"]

    def combine(frac: bool) -> str:
        members = [(n, digits) for n, (_, digits, is_frac) in enumerate(groups) if is_frac == frac]
        terms, weight = [], 1
        for n, digits in reversed(members):
            terms.append(f"g{n} * {weight}" if weight > 1 else f"g{n}")
            weight *= 10**digits
        return " + ".join(reversed(terms)) or "0"

    if scale:
        # Zero-padded fraction digits: table lookups beat format specs on the hot path.
        frac = combine(True)
        padded = {1: f"{{{frac}}}", 2: f"{{_P2[{frac}]}}", 4: f"{{_Y4[{frac}]}}"}.get(
            scale, f"{{{frac}:0{scale}d}}"
        )
        lines.append(f"{v} = _D(f'{{s}}{{{combine(False)}}}.{padded}')")
    else:
        lines.append(f"{v} = _D(f'{{s}}{{{combine(False)}}}')")
    return lines


@functools.lru_cache(maxsize=256)
def make_decimal_decoder(precision: int, scale: int):
    """Return ``decode(buf, pos) -> Decimal`` for NEWDECIMAL(precision, scale)."""
    ns: dict = {"_D": Decimal, "_P2": P2, "_Y4": Y4}

    def const(value: object, prefix: str) -> str:
        ns[prefix] = value
        return prefix

    src = "def decode(buf, pos):\n" + "".join(
        f"    {line}\n" for line in decimal_lines(precision, scale, "v", const) + ["return v"]
    )
    exec(compile(src, f"<DECIMAL({precision},{scale})>", "exec"), ns)
    return ns["decode"]


def frac_size(fsp: int) -> int:
    """Bytes of the fractional part of TIME2/DATETIME2/TIMESTAMP2 with ``fsp`` digits."""
    return (fsp + 1) // 2


def frac_text(micro: int, fsp: int) -> str:
    return f".{micro:06d}"[: fsp + 1] if fsp else ""


def frac_micro(buf: bytes, pos: int, fsp: int) -> int:
    n = (fsp + 1) // 2
    if n == 0:
        return 0
    v = int.from_bytes(buf[pos : pos + n], "big")
    return v * (10000, 100, 1)[n - 1]


def datetime2_lines(fsp: int, v: str) -> list[str]:
    """Straight-line source for DATETIME(fsp), MySQL 5.6.4+ format: a 40-bit packed value
    (year*13+month, day, hour, minute, second) plus a big-endian fraction."""
    lines = [
        "x = _int(buf[pos:pos + 5], 'big') - 549755813888",
        "if x < 0:",
        "    raise ValueError('DATETIME2 value without its sign bit')",
        "ymd = x >> 17",
        "ym = ymd >> 5",
        "hms = x & 131071",
        f"{v} = f'{{_Y4[ym // 13]}}-{{_P2[ym % 13]}}-{{_P2[ymd & 31]}} "
        f"{{_P2[hms >> 12]}}:{{_P2[(hms >> 6) & 63]}}:{{_P2[hms & 63]}}'",
    ]
    if fsp:
        lines.append(f"{v} += _v.frac_text(_v.frac_micro(buf, pos + 5, {fsp}), {fsp})")
    return lines


def timestamp2(buf: bytes, pos: int, fsp: int) -> str:
    """TIMESTAMP(fsp), MySQL 5.6.4+ format: big-endian epoch seconds plus fraction, shown in UTC."""
    secs = int.from_bytes(buf[pos : pos + 4], "big")
    micro = frac_micro(buf, pos + 4, fsp)
    return _epoch_text(secs) + frac_text(micro, fsp)


def _epoch_text(secs: int) -> str:
    if secs == 0:
        return "0000-00-00 00:00:00"
    t = time.gmtime(secs)
    return f"{Y4[t[0]]}-{P2[t[1]]}-{P2[t[2]]} {P2[t[3]]}:{P2[t[4]]}:{P2[t[5]]}"


def timestamp(buf: bytes, pos: int) -> str:
    """Old TIMESTAMP: little-endian epoch seconds."""
    return _epoch_text(int.from_bytes(buf[pos : pos + 4], "little"))


def time2(buf: bytes, pos: int, fsp: int) -> str:
    """TIME(fsp), MySQL 5.6.4+ format, including negative values with fractions."""
    n = (fsp + 1) // 2
    if n == 3:
        packed = int.from_bytes(buf[pos : pos + 6], "big") - 0x800000000000
    else:
        intpart = int.from_bytes(buf[pos : pos + 3], "big") - 0x800000
        frac = 0
        if n == 1:
            frac = buf[pos + 3]
            if intpart < 0 and frac:
                intpart += 1
                frac -= 0x100
            frac *= 10000
        elif n == 2:
            frac = int.from_bytes(buf[pos + 3 : pos + 5], "big")
            if intpart < 0 and frac:
                intpart += 1
                frac -= 0x10000
            frac *= 100
        packed = (intpart << 24) + frac
    sign = ""
    if packed < 0:
        sign = "-"
        packed = -packed
    hms = packed >> 24
    micro = packed & 0xFFFFFF
    text = f"{sign}{(hms >> 12) & 0x3FF:02d}:{(hms >> 6) & 63:02d}:{hms & 63:02d}"
    return text + frac_text(micro, fsp) if fsp else text


def time_old(buf: bytes, pos: int) -> str:
    """Old TIME: signed 3-byte little-endian integer HHMMSS."""
    v = int.from_bytes(buf[pos : pos + 3], "little", signed=True)
    sign = "-" if v < 0 else ""
    v = abs(v)
    return f"{sign}{v // 10000:02d}:{v // 100 % 100:02d}:{v % 100:02d}"


def datetime_old(buf: bytes, pos: int) -> str:
    """Old DATETIME: little-endian 64-bit integer YYYYMMDDhhmmss."""
    v = int.from_bytes(buf[pos : pos + 8], "little")
    d, t = divmod(v, 1000000)
    return f"{d // 10000:04d}-{d // 100 % 100:02d}-{d % 100:02d} {t // 10000:02d}:{t // 100 % 100:02d}:{t % 100:02d}"


def date(buf: bytes, pos: int) -> str:
    """DATE: 3-byte little-endian day | month << 5 | year << 9."""
    v = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
    return f"{v >> 9:04d}-{(v >> 5) & 15:02d}-{v & 31:02d}"


def year(v: int) -> int:
    """YEAR: one byte, offset from 1900; 0 is the zero year."""
    return v + 1900 if v else 0


def float32(v: float) -> float:
    """The shortest decimal that round-trips the 32-bit FLOAT, as the server prints it."""
    if v != v or v in (float("inf"), float("-inf")):
        return v
    for digits in range(1, 10):
        r = float(f"{v:.{digits}g}")
        try:
            if _FLOAT.unpack(_FLOAT.pack(r))[0] == v:
                return r
        except OverflowError:  # a rounded candidate above FLT_MAX
            continue
    return v
