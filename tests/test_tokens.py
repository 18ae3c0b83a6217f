"""o200k_base token counting, offline."""

import json
import os
import subprocess
import sys
from importlib.metadata import version

from pw.agent import tokens

NETWORK_VARS = ("HOME", "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                "no_proxy", "NO_PROXY", "TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR", "XDG_CACHE_HOME",
                "HF_HOME", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")


def test_known_o200k_ids():
    assert tokens.encode("Hello world") == [13225, 2375]
    assert tokens.count_tokens("Hello world") == 2
    assert tokens.count_tokens("") == 0


def test_special_token_text_counts_as_plain_text():
    # A brief quoting '<|endoftext|>' must be counted, not rejected.
    assert tokens.count_tokens("a <|endoftext|> b") > 3


def test_provenance_names_tokenizer_and_installed_version():
    assert tokens.TOKENIZER == "o200k_base"
    assert tokens.provenance() == {"tokenizer": "o200k_base", "package": "bpe-openai",
                                   "version": version("bpe-openai")}


def test_counts_offline_without_home_or_proxies():
    """A fresh interpreter with HOME and proxy variables unset and sockets disabled still counts."""
    env = {k: v for k, v in os.environ.items() if k not in NETWORK_VARS}
    program = (
        "import socket, json\n"
        "def refuse(*a, **k):\n"
        "    raise OSError('network used')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "socket.getaddrinfo = refuse\n"
        "from pw.agent import tokens\n"
        "print(json.dumps([tokens.encode('Hello world'), tokens.count_tokens('pw start --workload x')]))\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", program], env=env, cwd=root, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    ids, count = json.loads(done.stdout)
    assert ids == [13225, 2375]
    assert count == tokens.count_tokens("pw start --workload x")
