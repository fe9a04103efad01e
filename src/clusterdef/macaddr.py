"""MAC addresses that cannot belong to a host's NIC, for a `list` of MACs and a CSV inventory alike.

IEEE 802-2014 section 8.2: the least-significant bit of the first octet (the I/G bit) set makes a group
(multicast) address, and all ones is the broadcast address; a NIC's burned-in or assigned address is an
individual one. All zeros is what a failed read of the NIC or the BMC reports. dnsmasq would bind a host's
address and boot file to any of them (a `dhcp-host` line matches the client's chaddr), and every host that
sent it, or none, would boot as that node.
"""

from __future__ import annotations


def host_mac_problem(mac: str) -> str | None:
    """Why `mac` (lower-case, colon-separated) cannot be a host's NIC, or None when it can."""
    if mac == "ff:ff:ff:ff:ff:ff":
        return f"{mac} is the broadcast address, which no NIC has"
    if int(mac[:2], 16) & 1:
        return (f"{mac} is a multicast address (the first octet {mac[:2]} has its least-significant bit set), "
                "which no NIC has")
    if mac == "00:00:00:00:00:00":
        return f"{mac} is all zeros: what a failed read of the NIC reports, not a NIC's address"
    return None
