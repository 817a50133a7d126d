package io.npugather;

/**
 * A collective operation failed because a vendor library (HCCL, ACL or LCAL) returned an error
 * code. Besides whose fault it is ({@link #code()}), the operation and the rank, it carries the
 * vendor's verdict: the library, its numeric code, the code's name (e.g. {@code HCCL_E_TIMEOUT})
 * and the vendor's own text when the library provides one.
 */
public class VendorException extends NpuGatherException {
  private static final long serialVersionUID = 1L;

  private final String library;
  private final long vendorCode;
  private final String vendorCodeName;
  private final String vendorMessage;

  public VendorException(
      ResultCode code,
      String operation,
      int rank,
      String message,
      String library,
      long vendorCode,
      String vendorCodeName,
      String vendorMessage) {
    super(code, operation, rank, message);
    this.library = library;
    this.vendorCode = vendorCode;
    this.vendorCodeName = vendorCodeName;
    this.vendorMessage = vendorMessage;
  }

  /** "HCCL", "ACL" or "LCAL". */
  public String library() {
    return library;
  }

  /** The vendor's numeric code: an HcclResult, an aclError or an LCAL result (negative). */
  public long vendorCode() {
    return vendorCode;
  }

  /** The code's name, e.g. {@code HCCL_E_TIMEOUT}; {@code *_UNKNOWN} for codes not known here. */
  public String vendorCodeName() {
    return vendorCodeName;
  }

  /** The vendor's own text (HcclGetErrorString, aclGetRecentErrMsg); empty when it has none. */
  public String vendorMessage() {
    return vendorMessage;
  }
}
