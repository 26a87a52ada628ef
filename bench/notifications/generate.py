"""Signed V2 App Store notifications for bench/notifications/run.sh.

Usage: generate.py OUT_DIR ROUNDS PER_ROUND PURCHASES

Makes a throwaway chain shaped like Apple's (root, intermediate and leaf with Apple's marker extensions; the helpers
of scripts/signed-parity/generate_cases.py, run with that harness's venv) and writes:
  OUT_DIR/root.der          the root, for APPLE_ROOT_CERTIFICATES
  OUT_DIR/round-N.txt       PER_ROUND notification bodies ({"signedPayload": ...}), one a line, for round N
Every notification is a DID_RENEW of one of PURCHASES subscriptions (bn-0 … bn-{PURCHASES-1}, taken in turn), each
with a signed renewal transaction of a new period and signed renewal info: three ES256 signatures, as Apple sends
it. Each has its own notificationUUID and a later signedDate than the one before it, so every one is new and
changes its owner's entitlements (one webhook event each), in every round.
"""
import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "signed-parity"))
from generate_cases import (_DROP, DAY_MS, NOW_MS, compact_json, make_intermediate, make_leaf, make_root,  # noqa: E402
                            notification, renewal_info, sign_jws, transaction)


def main(out: str, rounds: int, per_round: int, purchases: int) -> None:
    root = make_root("Bench Root CA")
    intermediate = make_intermediate(root, cn="Bench Intermediate CA")
    leaf = make_leaf(intermediate, cn="Bench Notification Signing")
    chain = [leaf.x5c, intermediate.x5c, root.x5c]
    with open(os.path.join(out, "root.der"), "wb") as file:
        file.write(root.der)
    total = rounds * per_round
    periods = total // purchases + 1
    # Period j of every purchase starts j days after the first one, in the past; every period ends in the future, each
    # later than the one before (so each renewal changes its owner's entitlements and none ends during the run).
    first = NOW_MS - periods * DAY_MS
    for round_index in range(rounds):
        with open(os.path.join(out, f"round-{round_index}.txt"), "w") as file:
            for k in range(round_index * per_round, (round_index + 1) * per_round):
                purchase, period = k % purchases, k // purchases + 1
                original = f"bn-{purchase}"
                signed = NOW_MS - 3_600_000 - total + k
                bought = first + period * DAY_MS
                common = dict(originalTransactionId=original, environment="Sandbox", signedDate=signed, appAccountToken=_DROP)
                signed_transaction = sign_jws(transaction(transactionId=f"{original}-{period}", purchaseDate=bought,
                                                          originalPurchaseDate=first, expiresDate=bought + (periods + 30) * DAY_MS,
                                                          webOrderLineItemId=f"w-{original}-{period}", **common), leaf.key, chain)
                signed_renewal = sign_jws(renewal_info(renewalDate=bought + (periods + 30) * DAY_MS, **common), leaf.key, chain)
                body = notification(signed_transaction, signed_renewal, notificationUUID=str(uuid.uuid4()), signedDate=signed,
                                    notificationType="DID_RENEW")
                file.write(compact_json({"signedPayload": sign_jws(body, leaf.key, chain)}).decode() + "\n")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
