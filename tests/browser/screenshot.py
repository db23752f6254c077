#!/usr/bin/env python3
"""A PNG of a node's dashboard, as headless Chromium draws it at 1280x900.

    tests/browser/screenshot.py URL OUT.png [--wait SECONDS] [--full]

Waits SECONDS (default 12: the charts' second sample) after the page shows
its node, then saves the viewport (or, with --full, the whole page at
1280 wide). Used for docs/dashboard.png against the lab's edge
(http://127.0.0.1:7001/ui inside the `edge` namespace).
"""

import argparse
import sys
import time

from selenium.webdriver.common.by import By

from ui_test import Failure, browser, wait_for


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("out")
    parser.add_argument("--wait", type=float, default=12.0)
    parser.add_argument("--full", action="store_true", help="the whole page, not only the viewport")
    args = parser.parse_args()
    driver = browser()
    try:
        driver.get(args.url)
        wait_for("the page never showed its node", 10, lambda: driver.find_element(By.ID, "role").text.strip())
        # The window's frame aside, the page gets exactly 1280x900.
        frame = driver.execute_script("return window.outerHeight - window.innerHeight")
        driver.set_window_size(1280, 900 + frame)
        time.sleep(args.wait)
        if args.full:
            height = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(1280, max(900, height + 120))
        if not driver.save_screenshot(args.out):
            raise Failure(f"could not save {args.out}")
        errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        for e in errors:
            print(f"console error: {e.get('message')}", file=sys.stderr)
    except Failure as e:
        print(f"screenshot: {e}", file=sys.stderr)
        return 1
    finally:
        driver.quit()
    print(f"screenshot: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
