"""relay_lib.py - what the test relays on 127.0.0.1 share (cut_proxy.py, delay_proxy.py): the listening loop and the connection to the target."""
import socket
import threading


def dial(a, target):
    """The connection to 127.0.0.1:TARGET for the accepted A (blocking), or None (A closed) if it cannot be made."""
    try:
        b = socket.create_connection(("127.0.0.1", target), timeout=2)
    except OSError:
        a.close()
        return None
    b.settimeout(None)
    return b


def serve(port, relay, args, refuse=lambda: False):
    """Listens on 127.0.0.1:PORT, prints "ready", then runs relay(conn, *ARGS) in a thread for every connection; one accepted while refuse() holds is closed at once."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(16)
    print("ready", flush=True)
    while True:
        c, _ = ls.accept()
        if refuse():
            c.close()
            continue
        threading.Thread(target=relay, args=(c,) + tuple(args), daemon=True).start()
