"""Take the screenshots in docs/images/ from a running demo (not part of the test suite).

Usage: ``shoewarden demo --tables 4 --http 127.0.0.1:8800 --pace 0.3`` in one terminal,
then, after a minute, ``.venv/bin/python docs/images/screenshots.py 127.0.0.1:8800``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.browser import driver

HERE = Path(__file__).resolve().parent


def main() -> None:
    host, port = sys.argv[1].rsplit(":", 1)
    floor = f"http://{host}:{port}"
    shots = [("floor.png", floor + "/", 1400, 900),
             ("table.png", floor + "/tables/BJ-01", 1200, 1300),
             ("display.png", f"http://{host}:{int(port) + 2}/", 1280, 900),
             ("baccarat-board.png", floor + "/tables/BP-02", 1200, 1100)]
    for name, url, width, height in shots:
        with driver(width, height) as browser:
            browser.get(url)
            time.sleep(1.5)
            if name == "baccarat-board.png":
                board = browser.find_element("id", "board")
                board.screenshot(str(HERE / name))
            else:
                browser.save_screenshot(str(HERE / name))
        print("wrote", HERE / name)


if __name__ == "__main__":
    main()
